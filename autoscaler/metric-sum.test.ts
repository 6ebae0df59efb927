import { expect, test } from "vitest";
import { sumMetric } from "./metric-sum.ts";

test("samples with timestamps are summed by their values, not their timestamps (found by an outside tester)", () => {
  const text = [
    "# HELP vllm:num_requests_running Number of requests in model execution batches.",
    "# TYPE vllm:num_requests_running gauge",
    'vllm:num_requests_running{engine="0",model_name="m"} 3 1712345678000',
    'vllm:num_requests_running{engine="1",model_name="m"} 2.0\t1712345678000\r',
    "vllm:num_requests_running_total 99",
    "vllm:num_requests_waiting 1 1712345678000",
  ].join("\n");
  expect(sumMetric(text, "vllm:num_requests_running")).toBe(5);
  expect(sumMetric(text, "vllm:num_requests_waiting")).toBe(1);
  expect(sumMetric(text, "vllm:nothing")).toBe(0);
});

test("labels are matched by value, whatever another label's value holds (a space, a brace, quotes)", () => {
  const text = [
    'vllm:engine_sleep_state{model_name="a } b \\"sleep_state=\\\\\\"awake\\"",sleep_state="weights_offloaded"} 1 1712345678000',
    'vllm:engine_sleep_state{model_name="m",sleep_state="awake"} 0 1712345678000',
    'vllm:engine_sleep_state{model_name="m",sleep_state="discard_all"} 0',
    'vllm:engine_sleep_state{model_name="m" sleep_state="broken} 7',
  ].join("\n");
  const state = (name: string) => sumMetric(text, "vllm:engine_sleep_state", { sleep_state: name });
  expect([state("awake"), state("weights_offloaded"), state("discard_all")]).toEqual([0, 1, 0]);
  expect(sumMetric(text, "vllm:engine_sleep_state", { model_name: 'a } b "sleep_state=\\"awake"' })).toBe(1);
});
