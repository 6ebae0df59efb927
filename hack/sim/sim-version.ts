/** Version `/version` reports (and the system fingerprint carries): a semver that says it is not vLLM. */
export const simVersion = "0.0.0+snooze.sim";
