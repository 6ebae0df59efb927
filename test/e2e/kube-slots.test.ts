import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, test } from "vitest";
import { isResident } from "../../autoscaler/slot-arbiter.ts";
import { group, version } from "../../lib/kube/api-group.ts";
import { paths } from "../../lib/kube/client.ts";
import type { Pod } from "../../lib/kube/pod-replica.ts";
import type { Tier } from "../../lib/replica-event.ts";
import { cloudEventSink } from "../support/cloudevent-sink.ts";
import { kubeSnoozeSuite } from "./components/kube-suite.ts";
import { complete, createSharedGpuSlot, simState, tierOf } from "./components/snooze.ts";
import { waitFor } from "./harness/wait.ts";

/**
 * Two Models share one slot (one simulated GPU: the sims of both Deployments claim the same GPU,
 * and a second awake engine would not fit, exactly as vLLM fails). Requests alternate between them;
 * the autoscaler that holds the slot's Lease swaps them, and at no moment are two pods resident.
 */
const slot = `gpu-e2e-${Math.random().toString(36).slice(2, 6)}`;
const models = ["qwen", "llama"];
let sink: Awaited<ReturnType<typeof cloudEventSink>> | undefined;
const suite = kubeSnoozeSuite({
  namespace: "snooze-e2e-slots",
  objects: async ({ admin, ns, cluster }) => {
    await createSharedGpuSlot(admin, ns.name, cluster, slot, models);
  },
  start: async (s) => {
    // Tier changes and swaps go to a sink here as CloudEvents, as to a Knative Broker.
    sink = await cloudEventSink();
    await s.startAutoscaler("autoscaler-slots", { extra: ["--event-sink", sink.url] });
    s.activator = await s.startActivator("activator-slots");
  },
  teardown: () => sink?.close(),
});

/**
 * Polls every pod of both models: the most resident at once, and when two were seen. One list for
 * both: two lists are two moments, and a swap between them would look like two resident.
 */
function residencyMonitor() {
  let max = 0;
  let worst = "";
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      const pods: Pod[] = await suite.admin.pods(suite.ns.name, models);
      // A pod without a tier yet is starting; a pod on its way out of the slot is not resident.
      const residents = pods.filter((p) => isResident((tierOf(p) ?? "starting") as Tier));
      if (residents.length > max) {
        max = residents.length;
        worst = residents.map((p) => `${p.metadata.name}=${tierOf(p) ?? "(none)"}`).join(", ");
      }
      await new Promise((r) => setTimeout(r, 30));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await done;
      return { max, worst };
    },
  };
}

const logs = () => suite.logs(30, 10);
const snoozeBin = fileURLToPath(new URL("../../bin/snooze.js", import.meta.url));

describe("a slot with two Models on Kubernetes", () => {
  test("requests alternating between the two swap them, never with two resident", async () => {
    const monitor = residencyMonitor();
    const timings: string[] = [];
    try {
      for (const model of ["qwen", "llama", "qwen", "llama"]) {
        const answer = await complete(suite.activator.url, model);
        expect(answer.status, `${model}: ${answer.text}\n${logs()}`).toBe(200);
        timings.push(`${model} ${Math.round(answer.ms)}ms`);
      }
    } finally {
      const { max, worst } = await monitor.stop();
      expect(max, `two resident at once: ${worst}`).toBe(1);
    }
    console.log(`e2e: slot swaps through the activator: ${timings.join(", ")}`);
    // One pod per model: the second visit woke a sleeper instead of starting a pod.
    for (const model of models) expect(await suite.admin.pods(suite.ns.name, model)).toHaveLength(1);
    const [qwen] = await suite.admin.pods(suite.ns.name, "qwen");
    const [llama] = await suite.admin.pods(suite.ns.name, "llama");
    expect(tierOf(qwen!)).toBe("asleep-1");
    expect(tierOf(llama!)).toBe("ready");
    for (const pod of [qwen!, llama!])
      expect((await simState(pod.status!.podIP!)).arrivedWhileAsleep).toBe(0);
    const state = await suite.autoscaler.state();
    const slotState = state.units.find((u: any) => u.key === `slot:${slot}`).slots[0];
    expect(slotState.maxResidents).toBe(1);
    expect(slotState.swapCount).toBeGreaterThanOrEqual(3);
  }, 120_000);

  test("the Slot's status names its members, the resident and the swaps", async () => {
    const status = await waitFor(
      async () => {
        const s = (
          await suite.admin.client.get<any>(
            `/apis/snooze.dev/v1alpha1/namespaces/${suite.ns.name}/slots/${slot}`,
          )
        ).status;
        return s?.resident === "llama" && s.swapCount >= 3 ? s : undefined;
      },
      { what: "Slot status", timeoutMs: 10_000, detail: logs },
    );
    expect(status.members).toEqual(["llama", "qwen"]);
    expect(status.lastSwap).toMatchObject({ from: "qwen", to: "llama" });
    const lease = await suite.admin.client.get<any>(
      `/apis/coordination.k8s.io/v1/namespaces/snooze-system/leases/snooze-slot-${slot}`,
    );
    expect(lease.spec.holderIdentity).toBe("autoscaler-slots");
  });

  test("each swap is a dev.snooze.slot.swapped CloudEvent from the Lease holder, validated by the SDK", async () => {
    const swaps = await waitFor(
      async () => {
        const list = sink!.arrivals.filter((a) => a.event.type === "dev.snooze.slot.swapped");
        return list.length >= 3 ? list.map((a) => a.event) : undefined;
      },
      {
        what: "three swap events",
        timeoutMs: 10_000,
        detail: () => `${sink!.invalid.join("\n")}\n${logs()}`,
      },
    );
    expect(sink!.invalid).toEqual([]);
    expect(swaps.map((e) => `${e.data?.from}->${e.data?.to}`)).toEqual([
      "qwen->llama",
      "llama->qwen",
      "qwen->llama",
    ]);
    for (const event of swaps) {
      expect(event.subject).toBe(slot);
      expect(event.source).toBe("/snooze/autoscaler/autoscaler-slots");
      expect(event.data?.durationMs).toBeGreaterThan(0);
    }
    // Binary content mode by default, as Knative's own sources send.
    const swapArrival = sink!.arrivals.find((a) => a.event.type === "dev.snooze.slot.swapped")!;
    expect(swapArrival.headers["ce-type"]).toBe("dev.snooze.slot.swapped");
  });

  test("the same news is mirrored as Kubernetes Events on each Model: Started, Slept, Woke, Swapped; repeats in a series", async () => {
    type Event = {
      reason: string;
      note: string;
      type: string;
      action: string;
      reportingController: string;
      reportingInstance: string;
      regarding: { kind: string; name: string; uid?: string };
      series?: { count: number };
    };
    const eventsOf = async (model: string) =>
      (
        await suite.admin.client.list<Event>(`/apis/events.k8s.io/v1/namespaces/${suite.ns.name}/events`)
      ).items.filter((e) => e.regarding.kind === "Model" && e.regarding.name === model);
    const wanted: Record<string, string[]> = {
      qwen: ["Started", "Slept", "Woke", "Swapped"],
      llama: ["Started", "Slept", "Swapped"],
    };
    for (const model of models) {
      const events = await waitFor(
        async () => {
          const list = await eventsOf(model);
          const reasons = new Set(list.map((e) => e.reason));
          return wanted[model]!.every((r) => reasons.has(r)) ? list : undefined;
        },
        { what: `the Events of Model ${model}`, timeoutMs: 10_000, detail: logs },
      );
      const uid = (await suite.admin.model(suite.ns.name, model)).metadata.uid;
      for (const event of events) {
        expect(event).toMatchObject({
          type: "Normal",
          reportingController: "snooze.dev/autoscaler",
          reportingInstance: "autoscaler-slots",
          regarding: { kind: "Model", name: model, uid },
        });
        expect(event.reason).toMatch(/^[A-Z][a-zA-Z]+$/);
      }
      // One Event per reason: the swaps to and from this Model are one Event with a series.
      const byReason = new Map<string, Event[]>();
      for (const e of events) byReason.set(e.reason, [...(byReason.get(e.reason) ?? []), e]);
      expect(byReason.get("Swapped"), JSON.stringify(events, null, 1)).toHaveLength(1);
      expect(byReason.get("Swapped")![0]!.series?.count).toBe(3);
      expect(byReason.get("Started")![0]!.note).toMatch(/^Replica \S+ started in \d+(\.\d+)?m?s$/);
      expect(byReason.get("Slept")![0]!.note).toMatch(/slept at level 1 \(drained and slept in /);
    }
    const took = (await eventsOf("llama")).find((e) => e.reason === "Swapped")!;
    expect(took.note).toMatch(new RegExp(`^Took slot ${slot} from qwen in `));
    // What a person sees: kubectl get events lists them for the Model, with the series' count.
    const { stdout } = await promisify(execFile)(
      suite.cluster.info.kubectl,
      [
        "get",
        "events",
        "-n",
        suite.ns.name,
        "--field-selector",
        "involvedObject.kind=Model,involvedObject.name=qwen",
        "-o",
        "custom-columns=REASON:.reason,COUNT:.series.count,MESSAGE:.message",
      ],
      { env: { ...process.env, KUBECONFIG: suite.cluster.info.kubeconfigPath } },
    );
    expect(stdout).toMatch(/Swapped\s+3\s+(Took|Gave) slot/);
    expect(stdout).toMatch(/Woke\s+\S+\s+Replica \S+ woke in /);
  });

  test("a stream on the incumbent that outlasts the Slot's drainTimeout is ended then (drain_timeout); the incumbent sleeps and the other Model is answered", async () => {
    // Swap at once (no maxWait), and a drain of 2 s: the activator learns its end from the pod.
    await suite.admin.client.patch(`${paths.custom(group, version, "slots", suite.ns.name)}/${slot}`, {
      spec: { maxWait: "0s", drainTimeout: "2s" },
    });
    expect((await complete(suite.activator.url, "qwen")).status).toBe(200);
    // 4,000 tokens (the sim's context is 4,096) at 2 ms each: an 8 s stream.
    const stream = await fetch(`${suite.activator.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "qwen",
        prompt: "hello",
        max_tokens: 4_000,
        ignore_eos: true,
        stream: true,
      }),
      signal: AbortSignal.timeout(60_000),
    });
    if (stream.status !== 200) expect.fail(`qwen's stream: ${stream.status} ${await stream.text()}`);
    const reader = stream.body!.getReader();
    await reader.read();
    const started = performance.now();
    const other = await complete(suite.activator.url, "llama");
    expect(other.status, `${other.text}\n${logs()}`).toBe(200);
    let rest = "";
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
      rest += new TextDecoder().decode(chunk.value);
    const events = rest.split("\n\n").filter((e) => e.startsWith("data: "));
    expect(events.slice(-2)[0], rest.slice(-500)).toMatch(/^data: \{"error":\{.*"code":"drain_timeout"/);
    expect(events.at(-1)).toBe("data: [DONE]");
    console.log(`e2e: llama answered ${Math.round(performance.now() - started)} ms into qwen's 8 s stream`);
    const [qwen] = await suite.admin.pods(suite.ns.name, "qwen");
    expect(tierOf(qwen!)).toBe("asleep-1");
  });

  test("snooze wake, the command, follows a wake that waits for the slot: llama sleeps, qwen is ready, the command exits 0", async () => {
    const monitor = residencyMonitor();
    let stdout = "";
    try {
      ({ stdout } = await promisify(execFile)(
        process.execPath,
        [snoozeBin, "wake", "qwen", "--url", suite.activator.url, "--timeout", "60s"],
        { timeout: 90_000 },
      ));
    } finally {
      const { max, worst } = await monitor.stop();
      expect(max, `two resident at once: ${worst}`).toBe(1);
    }
    // The swap's steps as the command prints them, then the end: ready, naming the pod.
    expect(stdout, logs()).toMatch(/^qwen: ready after \S+ \(qwen-\S+\)$/m);
    const [qwen] = await suite.admin.pods(suite.ns.name, "qwen");
    const [llama] = await suite.admin.pods(suite.ns.name, "llama");
    expect(tierOf(qwen!)).toBe("ready");
    expect(tierOf(llama!)).toBe("asleep-1");
    console.log(`e2e: snooze wake through a swap:\n${stdout}`);
  }, 120_000);
});
