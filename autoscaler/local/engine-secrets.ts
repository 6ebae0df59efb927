import { apiKeyFlag, hfTokenFlag, readAs, vllmFlagValues } from "../../lib/vllm-flag.ts";
import { vllmApiKey } from "../engine-client.ts";

/** vLLM's flags whose value is a secret: its API key and a Hugging Face token. */
const secretFlags = [apiKeyFlag, hfTokenFlag];

const hidden = "[redacted]";

/** A secret flag, in any spelling vLLM reads (`--api_key`, `--api-k`), and its value inside one argument. */
const flagInText = /(--api[-_]k[\w-]*|--hf[-_]t[\w-]*)(=|\s+)(?!--)\S+/g;

/** The secret flag `word` is, as vLLM reads it (lib/vllm-flag.ts). */
const secretFlagOf = (word: string) => secretFlags.find((flag) => readAs(word, flag));

/**
 * A key this short is not looked for in the engine's output: replacing every "ab" of it would
 * garble the lines and hide little. Its flag's value in the command is hidden all the same.
 */
const shortestSought = 4;

/**
 * What Snooze shows of an engine without its secrets: the command it runs (the `engine starting`
 * log line) with the values of `--api-key` and `--hf-token` hidden, and its output lines (the log
 * at debug, `snooze logs`, a failed start's last words in 503s and CloudEvents) with every
 * occurrence of those values and of `VLLM_API_KEY` hidden: vLLM prints its non-default arguments,
 * the key among them, as it starts (found by an outside tester: the engine's `--api-key`, which
 * clients send as their bearer token, was in every `engine starting` line at info level).
 */
export class EngineSecrets {
  private readonly args: readonly string[];
  private readonly sought: string[];

  constructor(args: readonly string[], env: Readonly<Record<string, string | undefined>>) {
    this.args = args;
    const values = [vllmApiKey(args, env), ...flagValues(args)];
    // Longest first: a key inside a longer token would otherwise leave the token's rest shown.
    this.sought = [...new Set(values)]
      .filter((v): v is string => !!v && v.length >= shortestSought)
      .sort((a, b) => b.length - a.length);
  }

  /** The command line, `file` and its arguments joined by spaces, with the secrets' values hidden. */
  command(file: string): string {
    const shown: string[] = [file];
    for (const [index, arg] of this.args.entries()) {
      const flag = arg.includes("=") ? secretFlagOf(arg) : undefined;
      if (flag) shown.push(`${arg.slice(0, arg.indexOf("="))}=${hidden}`);
      else if (
        secretFlagOf(this.args[index - 1] ?? "") &&
        !this.args[index - 1]!.includes("=") &&
        !arg.startsWith("--")
      )
        shown.push(hidden);
      // A flag inside one argument (a shell's script: `sh -c "exec vllm serve --api-key …"`).
      else shown.push(this.hide(arg).replace(flagInText, `$1$2${hidden}`));
    }
    return shown.join(" ");
  }

  /** `text` with every secret value in it hidden (a line of the engine's output). */
  hide(text: string): string {
    let shown = text;
    for (const secret of this.sought) if (shown.includes(secret)) shown = shown.replaceAll(secret, hidden);
    return shown;
  }
}

function flagValues(args: readonly string[]): string[] {
  return secretFlags.flatMap((flag) => vllmFlagValues(args, flag).flat());
}
