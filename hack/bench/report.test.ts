import { describe, expect, test } from "vitest";
import { type BenchResults, renderResults } from "./report.ts";
import { replaceSection } from "./slots/docs-section.ts";

const machine = {
  date: "2026-01-01 00:00",
  cores: 2,
  cpuModel: "test CPU",
  memoryGiB: 24,
  node: "v24.0.0",
  nginx: "1.22.1",
  wrk: "4.1.0",
  loadAverage: "0.00 0.00 0.00",
};

function results(activatorRps: number, addedP50Us: number): BenchResults {
  const row = (target: string, rps: number, added: number) => ({
    target: target as "direct",
    p50Us: 20 + added,
    p99Us: 100,
    addedP50Us: added,
    addedP99Us: 50,
    requestsPerSecond: rps,
    cpuUsPerRequest: 10,
    errors: 0,
  });
  return {
    command: "npm run bench",
    quick: false,
    code: "abc1234",
    machine,
    seconds: 60,
    warmPath: {
      rounds: 3,
      latencySeconds: 5,
      throughputSeconds: 5,
      throughputConnections: 64,
      summaries: [
        row("direct", 90_000, 0),
        row("nginx-1w", 30_000, 30),
        row("activator", activatorRps, addedP50Us),
      ],
      throughputVsNginx1: activatorRps / 30_000,
      throughputVsNginxAuto: activatorRps / 35_000,
      throughputVsNodeMinimal: 0.8,
      nodeVsNginx1: { relay: 0.95, framed: 0.7, minimal: 0.4 },
    },
  };
}

describe("benchmark report", () => {
  test("judges each figure against its target and names the command and machine", () => {
    const missed = renderResults(results(3_000, 120));
    expect(missed).toContain("npm run bench");
    expect(missed).toContain("Node v24.0.0, nginx 1.22.1");
    expect(missed).toMatch(/p50 added vs direct \| 120 µs .*\| met \|/);
    expect(missed).toMatch(/requests\/s vs nginx \(1 worker\) \| 0\.10× .*\| \*\*missed\*\* \|/);
    const met = renderResults(results(20_000, 600));
    expect(met).toMatch(/requests\/s vs nginx \(1 worker\) \| 0\.67× .*\| met \|/);
    expect(met).toMatch(/p50 added vs direct \| 600 µs .*\| \*\*missed\*\* \|/);
    expect(met).toMatch(
      /of Node itself, without Snooze \| bytes relayed, no HTTP: 0\.95×; HTTP framed by hand on raw sockets: 0\.70×; node:http \+ undici: 0\.40× \|/,
    );
  });

  test("compares with llama-swap when it ran, and says so when it did not", () => {
    const without = results(3_000, 120);
    expect(renderResults(without)).toContain("llama-swap not run (`BENCH_LLAMA_SWAP` names no checkout)");
    const peer = {
      ...without.warmPath!.summaries[2]!,
      target: "llama-swap" as const,
      requestsPerSecond: 2_000,
      addedP50Us: 700,
    };
    const withPeer: BenchResults = {
      ...without,
      llamaSwap: "0bdb372",
      warmPath: {
        ...without.warmPath!,
        summaries: [...without.warmPath!.summaries, peer],
        throughputVsLlamaSwap: 1.5,
      },
    };
    const text = renderResults(withPeer);
    expect(text).toContain("llama-swap 0bdb372");
    expect(text).toMatch(
      /requests\/s vs llama-swap \| 1\.50× \(p50 added: activator 120 µs, llama-swap 700 µs\)/,
    );
    expect(text).toContain("1.50× llama-swap.");
  });

  test("judges the chunk rate against llama-swap on the largest streaming run, and not without it", () => {
    const run = (streams: number, rateVsLlamaSwap?: number) => ({
      rounds: 2,
      streams,
      itlMs: 10,
      windowSeconds: 5,
      offeredPerSecond: streams * 100,
      summaries: ["nginx-1w", "activator"].map((target) => ({
        target: target as "activator",
        eventsPerSecond: 1_000,
        cpuUsPerEvent: target === "activator" ? 12 : 10,
        cores: 0.6,
        peakRss: 2 ** 20,
        streamsLive: streams,
        allStartedSeconds: 1,
        firstEventMs: { p99: 500, max: 900 },
        errors: [],
      })),
      rateVsNginx1: 0.9,
      rateVsNginxAuto: 0.9,
      ...(rateVsLlamaSwap === undefined ? {} : { rateVsLlamaSwap }),
    });
    const judged = renderResults({ ...results(3_000, 120), streaming: [run(250, 1.04), run(1_000, 0.88)] });
    expect(judged).toMatch(/chunks\/s vs llama-swap, 1000 streams \| 0\.88× +\| ≥ 1× +\| \*\*missed\*\* \|/);
    expect(judged).toMatch(/Streaming, 250 streams: .*1\.04× llama-swap's; 1\.20× nginx's CPU per chunk/);
    const alone = renderResults({ ...results(3_000, 120), streaming: [run(1_000)] });
    expect(alone).toMatch(/chunks\/s vs llama-swap, 1000 streams \| not run .*\| not judged \|/);
  });

  test("judges each stream's first event and the admin API during the largest streaming run", () => {
    const run = (firstMaxMs: number, adminMaxMs: number, live = 1_000) => ({
      rounds: 2,
      streams: 1_000,
      itlMs: 10,
      windowSeconds: 5,
      offeredPerSecond: 100_000,
      summaries: ["nginx-1w", "activator"].map((target) => ({
        target: target as "activator",
        eventsPerSecond: 1_000,
        cpuUsPerEvent: 10,
        cores: 0.6,
        peakRss: 2 ** 20,
        streamsLive: live,
        allStartedSeconds: 3,
        firstEventMs: { p99: firstMaxMs / 2, max: firstMaxMs },
        ...(target === "activator"
          ? {
              admin: {
                p50Ms: adminMaxMs / 2,
                maxMs: adminMaxMs,
                probes: 70,
                loopDelay: { p50Ms: 1, p99Ms: 40, maxMs: 60, gcMs: 12, gcMaxMs: 3 },
              },
            }
          : {}),
        errors: [],
      })),
      rateVsNginx1: 0.9,
      rateVsNginxAuto: 0.9,
    });
    const render = (first: number, admin: number, live?: number) =>
      renderResults({ ...results(3_000, 120), streaming: [run(first, admin, live)] });
    const met = render(900, 80);
    expect(met).toMatch(
      /first event after its request, 1000 streams .*\| max 0\.90 s, p99 0\.45 s; 1000\/1000 live .*\| ≤ 1 s +\| met/,
    );
    expect(met).toMatch(
      /`\/healthz` during 1000 streams +\| p50 40\.0 ms, max 80\.0 ms; event-loop delay p99 40\.0 ms +\| ≤ 100 ms +\| met/,
    );
    const missed = render(Number.POSITIVE_INFINITY, 177);
    expect(missed).toMatch(/first event after its request, 1000 streams .*\| max never, .*\| \*\*missed\*\*/);
    expect(missed).toMatch(/during 1000 streams +\| p50 88\.5 ms, max 177\.0 ms.*\| \*\*missed\*\*/);
    expect(render(900, 80, 999)).toMatch(/999\/1000 live .*\| \*\*missed\*\*/);
  });

  test("rewrites only its own section of the document", () => {
    const doc =
      "# Benchmarks\n\nintro\n\n<!-- bench:begin -->\nold\n<!-- bench:end -->\n\n<!-- slots:begin -->\nkeep\n<!-- slots:end -->\n";
    const next = replaceSection(doc, "bench", "new results");
    expect(next).toContain("<!-- bench:begin -->\nnew results\n<!-- bench:end -->");
    expect(next).toContain("intro");
    expect(next).toContain("<!-- slots:begin -->\nkeep\n<!-- slots:end -->");
    expect(next).not.toContain("old");
  });
});
