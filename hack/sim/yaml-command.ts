/**
 * A `snooze sim` engine as the `command` of a model in snooze.yaml (a YAML flow list), with every
 * delay of the simulator scaled by `scale`: what the tests and the chaos run configure.
 */
export function simCommand(extra: string[] = [], scale = 0.05): string {
  const args = [
    "${SNOOZE}",
    "sim",
    "--served-model-name",
    "${MODEL}",
    "--port",
    "${PORT}",
    "--time-scale",
    String(scale),
    ...extra,
  ];
  return `[${args.map((a) => JSON.stringify(a)).join(", ")}]`;
}
