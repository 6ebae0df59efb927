/** The simulator's programmatic surface, for tests and benchmarks. See docs/simulator.md. */
export { SimEngine, SimStartError } from "./engine.ts";
export { defaultSimOptions, resolveSimOptions, type SimGpuOptions, type SimOptions } from "./options.ts";
export { type SimHandle, type StartSimSettings, simVersion, startSim } from "./server.ts";
