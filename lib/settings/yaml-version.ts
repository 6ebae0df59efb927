import type { ConfigProblem } from "./config-error.ts";

/**
 * A `%YAML` directive asking for another YAML than 1.2, at its line. The YAML library reads a file
 * that starts with `%YAML 1.1` by the YAML 1.1 schema, where `yes`, `no`, `on`, `off`, `y` and `n`
 * are booleans, `010` is eight and `1:30` is ninety; without the directive, `sleep: yes` is the text
 * "yes" and refused. One line would change what the same values mean, so every file is read as
 * YAML 1.2 (the core schema) and a directive asking otherwise is refused, saying so: the file means
 * one thing, whatever its first line says. Directives come only before the document's `---`, after
 * blank lines and comments, so the lines up to the first other line are all there is to look at.
 */
export function yamlVersionProblem(text: string): ConfigProblem | undefined {
  const lines = text.replace(/^\uFEFF/, "").split(/\r\n|\r|\n/);
  for (const [index, line] of lines.entries()) {
    if (/^\s*(#.*)?$/.test(line)) continue;
    const directive = /^%YAML(?:[ \t]+([^\s#]*))?/.exec(line);
    if (!directive) {
      if (line.startsWith("%")) continue; // another directive (%TAG)
      return undefined;
    }
    const version = directive[1] ?? "";
    // No version at all is the YAML parser's to report (the directive needs one).
    if (version === "1.2" || version === "") return undefined;
    return {
      key: "",
      message:
        version === "1.1"
          ? "`%YAML 1.1`: settings files are read as YAML 1.2 only, where `yes`, `no`, `on` and `off` are text (write `true` or `false`) and `010` is ten; remove this line"
          : `\`%YAML ${version}\`: settings files are read as YAML 1.2 only; remove this line`,
      line: index + 1,
      column: 1,
    };
  }
  return undefined;
}
