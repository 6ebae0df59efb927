/**
 * How a local engine is put on its slot's GPU: `CUDA_VISIBLE_DEVICES`, which CUDA (so vLLM) reads
 * in the engine's process. Found by an outside tester: a slot's `device` was taken and then used
 * only on Kubernetes (the webhook's NVIDIA_VISIBLE_DEVICES), so in local mode every engine ran on
 * the first GPU, two slots' residents on one device.
 */
export const cudaDevicesEnv = "CUDA_VISIBLE_DEVICES";

/** "<gpu>:<mig>" (`0:1`) is the NVIDIA container runtime's form: CUDA takes a MIG device by its UUID. */
const containerRuntimeForm = /^\d+:\d+$/;

/** **Pure**: why a slot's `device` would leave a local engine no GPU, if it would. */
export function deviceCudaCannotRead(device: string | undefined): string | undefined {
  if (device === undefined || !containerRuntimeForm.test(device)) return undefined;
  return `${JSON.stringify(device)} is the NVIDIA container runtime's form, which ${cudaDevicesEnv} does not take: a local engine of the slot would see no GPU; name the MIG device by its UUID ("MIG-…", as \`nvidia-smi -L\` shows it)`;
}

/** **Pure**: the warning for a model whose own `env` sets another GPU than its slot's `device`. */
export function replacedDeviceEnv(
  env: Record<string, string> | undefined,
  device: string | undefined,
): string | undefined {
  const own = env?.[cudaDevicesEnv];
  if (device === undefined || own === undefined || own === device) return undefined;
  return `replaced by its slot's device ${JSON.stringify(device)}: the engines of a slot run on its one GPU`;
}
