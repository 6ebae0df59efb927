/**
 * The values `vllm serve` refuses at start for the flags users pass most, which the simulator
 * takes without modelling them: argparse checks a value's type (`type=int`, `type=float`) and a
 * `Literal` field's choices before vLLM starts, and exits 2 (`argument --dtype: invalid choice:
 * 'bogus' (choose from ...)`). Found by an outside tester: `snooze sim --dtype bogus` and
 * `--tensor-parallel-size x` started, so a command that works on the simulator failed on vLLM.
 *
 * Deliberately small: only flags whose type and choices have held across vLLM releases (see
 * vllm/config/model.py `ModelDType`, vllm/config/scheduler.py `SchedulerPolicy`,
 * vllm/model_executor/layers/quantization/__init__.py `QuantizationMethods`: there, every method
 * of 0.11 or of a later release, so no release's method is refused). Flags the simulator models
 * (`--max-num-seqs`, `--gpu-memory-utilization`, `--max-model-len`, `--seed`) are checked by it.
 */
import { UsageError } from "../../lib/cli-flags.ts";
import { pythonInt } from "./argparse-int.ts";
import { laxFloat } from "./lax-float.ts";
import { vllmShortFlags } from "./vllm-flags.ts";

type ValueRule = { type: "int" } | { type: "float" } | { type: "str"; choices: readonly string[] };

const int: ValueRule = { type: "int" };
const float: ValueRule = { type: "float" };
const oneOf = (...choices: string[]): ValueRule => ({ type: "str", choices });

const quantizationMethods = [
  // 0.11
  ...["awq", "deepspeedfp", "tpu_int8", "fp8", "ptpc_fp8", "fbgemm_fp8", "fp_quant", "modelopt"],
  ...["modelopt_fp4", "bitblas", "gguf", "gptq_marlin_24", "gptq_marlin", "gptq_bitblas", "awq_marlin"],
  ...["gptq", "compressed-tensors", "bitsandbytes", "hqq", "experts_int8", "ipex", "quark"],
  ...["moe_wna16", "torchao", "auto-round", "rtn", "inc", "mxfp4", "petit_nvfp4"],
  // later releases
  ...["auto_awq", "auto_gptq", "modelopt_mxfp8", "modelopt_mixed", "humming", "gpt_oss_mxfp4"],
  ...["deepseek_v4_fp8", "cpu_awq", "online", "fp8_per_tensor", "fp8_per_block", "fp8_per_channel"],
  ...["int8_per_channel_weight_only", "nvfp4_per_token", "mxfp8"],
];

/** By flag name (no dashes): how argparse reads its value. */
export const vllmValueRules: ReadonlyMap<string, ValueRule> = new Map([
  ["dtype", oneOf("auto", "half", "float16", "bfloat16", "float", "float32")],
  ["quantization", oneOf(...quantizationMethods)],
  ["scheduling-policy", oneOf("fcfs", "priority")],
  ["uvicorn-log-level", oneOf("debug", "info", "warning", "error", "critical", "trace")],
  ["tensor-parallel-size", int],
  ["pipeline-parallel-size", int],
  ["data-parallel-size", int],
  ["data-parallel-size-local", int],
  ["data-parallel-rank", int],
  ["data-parallel-start-rank", int],
  ["data-parallel-rpc-port", int],
  ["api-server-count", int],
  ["block-size", int],
  ["max-logprobs", int],
  ["max-loras", int],
  ["max-lora-rank", int],
  ["max-cpu-loras", int],
  ["num-gpu-blocks-override", int],
  ["max-parallel-loading-workers", int],
  ["max-num-partial-prefills", int],
  ["max-long-partial-prefills", int],
  ["swap-space", float],
  ["cpu-offload-gb", float],
]);

/**
 * Refuses `value` for `--name` as vLLM's argparse would, in its words: a
 * UsageError (exit code 2). A flag not in the table, or a value it takes, passes.
 */
export function checkVllmValue(name: string, value: string): void {
  const rule = vllmValueRules.get(name);
  if (rule === undefined) return;
  // argparse names the option by all its spellings: `--tensor-parallel-size/-tp`.
  const short = [...vllmShortFlags].find(([, long]) => long === name)?.[0];
  const written = short === undefined ? `--${name}` : `--${name}/-${short}`;
  const shown = `'${value.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
  if (rule.type === "int" && pythonInt(value) === undefined)
    throw new UsageError(`argument ${written}: invalid int value: ${shown}`);
  if (rule.type === "float" && !laxFloat(value).ok)
    throw new UsageError(`argument ${written}: invalid float value: ${shown}`);
  if (rule.type === "str" && !rule.choices.includes(value))
    throw new UsageError(
      `argument ${written}: invalid choice: ${shown} (choose from ${rule.choices.map((c) => `'${c}'`).join(", ")})`,
    );
}
