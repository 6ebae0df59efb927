import { describe, expect, test } from "vitest";
import type { KIngress } from "./ingress-class.ts";
import { chooseSplit, compileHostTable, matchHost, normalizeHost, pickSplit } from "./ingress-routes.ts";

/** A KIngress shaped as Knative's Route reconciler writes it (resources/ingress.go). */
function routeIngress(
  name: string,
  splits: { revision: string; percent: number }[],
  extra: { created?: string; tagPaths?: { tag: string; revision: string }[] } = {},
): KIngress {
  const basePath = {
    splits: splits.map((s) => ({
      serviceNamespace: "team-a",
      serviceName: s.revision,
      servicePort: 80,
      percent: s.percent,
      appendHeaders: { "Knative-Serving-Revision": s.revision, "Knative-Serving-Namespace": "team-a" },
    })),
    appendHeaders: { "Knative-Serving-Default-Route": "true" },
  };
  const tagPaths = (extra.tagPaths ?? []).map((t) => ({
    headers: { "Knative-Serving-Tag": { exact: t.tag } },
    splits: [{ serviceNamespace: "team-a", serviceName: t.revision, servicePort: 80, percent: 100 }],
  }));
  return {
    apiVersion: "networking.internal.knative.dev/v1alpha1",
    kind: "Ingress",
    metadata: {
      name,
      namespace: "team-a",
      uid: `uid-${name}`,
      generation: 3,
      creationTimestamp: extra.created ?? "2026-01-01T00:00:00Z",
    },
    spec: {
      rules: [
        {
          hosts: [`${name}.team-a`, `${name}.team-a.svc`, `${name}.team-a.svc.cluster.local`],
          visibility: "ClusterLocal",
          http: { paths: [...tagPaths, basePath] },
        },
        {
          hosts: [`${name}.team-a.example.com`],
          visibility: "ExternalIP",
          http: { paths: [...tagPaths, basePath] },
        },
      ],
    },
  };
}

describe("host table", () => {
  test("every host of every rule, external and cluster-local, with the KIngress's version", () => {
    const table = compileHostTable([routeIngress("qwen", [{ revision: "qwen-00001", percent: 100 }])]);
    expect([...table.hosts.keys()].sort()).toEqual([
      "qwen.team-a",
      "qwen.team-a.example.com",
      "qwen.team-a.svc",
      "qwen.team-a.svc.cluster.local",
    ]);
    expect(table.hosts.get("qwen.team-a.example.com")).toMatchObject({
      ingress: "team-a/qwen",
      version: "uid-qwen/3",
    });
    expect(table.conflicts).toEqual([]);
  });

  test("a host two KIngresses claim goes to the older one, and the conflict is reported", () => {
    const older = routeIngress("qwen", [{ revision: "a", percent: 100 }], {
      created: "2026-01-01T00:00:00Z",
    });
    // Another KIngress (another name) that claims the same hosts, made later.
    const newer = routeIngress("qwen", [{ revision: "b", percent: 100 }]);
    newer.metadata = { ...older.metadata, name: "other", creationTimestamp: "2026-02-01T00:00:00Z" };
    const table = compileHostTable([newer, older]);
    expect(table.hosts.get("qwen.team-a.example.com")?.ingress).toBe("team-a/qwen");
    expect(table.conflicts).toContainEqual({
      host: "qwen.team-a.example.com",
      kept: "team-a/qwen",
      refused: "team-a/other",
    });
  });

  test("a KIngress being deleted routes nothing", () => {
    const ingress = routeIngress("qwen", [{ revision: "a", percent: 100 }]);
    ingress.metadata.deletionTimestamp = "2026-03-01T00:00:00Z";
    expect(compileHostTable([ingress]).hosts.size).toBe(0);
  });

  test.each([
    ["Qwen.Team-A.example.com:8080", "qwen.team-a.example.com"],
    ["qwen.team-a.example.com.", "qwen.team-a.example.com"],
    ["[::1]:80", "[::1]"],
    [undefined, ""],
  ])("Host %s is %s", (raw, host) => {
    expect(normalizeHost(raw)).toBe(host);
  });
});

describe("matching a request", () => {
  const table = compileHostTable([
    routeIngress("qwen", [{ revision: "qwen-00001", percent: 100 }], {
      tagPaths: [{ tag: "canary", revision: "qwen-00002" }],
    }),
  ]);

  test("an unknown host is none of Knative's business", () => {
    expect(matchHost(table, "other.example.com", "/v1/chat/completions", {}).kind).toBe("none");
  });

  test("the default path takes a request without the tag header, with both levels of appended headers", () => {
    const match = matchHost(table, "qwen.team-a.example.com", "/v1/chat/completions", {});
    expect(match.kind).toBe("path");
    if (match.kind !== "path") return;
    expect(match.path.splits[0]).toEqual({
      namespace: "team-a",
      name: "qwen-00001",
      percent: 100,
      appendHeaders: {
        "Knative-Serving-Default-Route": "true",
        "Knative-Serving-Revision": "qwen-00001",
        "Knative-Serving-Namespace": "team-a",
      },
    });
  });

  test("a header match comes first when its header has the exact value (names are case-insensitive)", () => {
    const tagged = matchHost(table, "qwen.team-a", "/v1/completions", { "knative-serving-tag": "canary" });
    expect(tagged.kind === "path" && tagged.path.splits[0]?.name).toBe("qwen-00002");
    const otherValue = matchHost(table, "qwen.team-a", "/v1/completions", {
      "knative-serving-tag": "Canary",
    });
    expect(otherValue.kind === "path" && otherValue.path.splits[0]?.name).toBe("qwen-00001");
  });

  test("a path prefix is literal; the query is not part of the path; no matching path is said so", () => {
    const ingress = routeIngress("qwen", [{ revision: "qwen-00001", percent: 100 }]);
    ingress.spec!.rules![1]!.http!.paths[0]!.path = "/v1/chat";
    const prefixed = compileHostTable([ingress]);
    expect(matchHost(prefixed, "qwen.team-a.example.com", "/v1/chat/completions?x=/v1/chat", {}).kind).toBe(
      "path",
    );
    expect(matchHost(prefixed, "qwen.team-a.example.com", "/v1/embeddings?p=/v1/chat", {}).kind).toBe(
      "no-path",
    );
  });

  test("a single split without percent takes everything", () => {
    const ingress = routeIngress("qwen", [{ revision: "qwen-00001", percent: 100 }]);
    delete ingress.spec!.rules![1]!.http!.paths[0]!.splits[0]!.percent;
    const match = matchHost(compileHostTable([ingress]), "qwen.team-a.example.com", "/v1/models", {});
    expect(match.kind === "path" && match.path.splits[0]?.percent).toBe(100);
  });
});

describe("weighted choice", () => {
  const count = (weights: number[], n: number) => {
    const counts = weights.map(() => 0);
    let current = weights.map(() => 0);
    for (let i = 0; i < n; i++) {
      const picked = pickSplit(weights, current)!;
      counts[picked.index]!++;
      current = picked.current;
    }
    return counts;
  };

  test("50/50 over 200 requests is exactly 100/100, alternating", () => {
    expect(count([50, 50], 200)).toEqual([100, 100]);
    const first = pickSplit([50, 50], [0, 0])!;
    const second = pickSplit([50, 50], first.current)!;
    expect(first.index).not.toBe(second.index);
  });

  test.each([
    [[10, 90], 100, [10, 90]],
    [[33, 33, 34], 100, [33, 33, 34]],
    [[1, 99], 100, [1, 99]],
    [[0, 100], 50, [0, 50]],
  ])("weights %j over %i requests give %j", (weights, n, expected) => {
    expect(count(weights, n)).toEqual(expected);
  });

  test("the minority split is spread out, not sent in a run", () => {
    let current = [0, 0];
    const picks: number[] = [];
    for (let i = 0; i < 20; i++) {
      const picked = pickSplit([20, 80], current)!;
      picks.push(picked.index);
      current = picked.current;
    }
    const positions = picks.flatMap((p, i) => (p === 0 ? [i] : []));
    expect(positions).toHaveLength(4);
    for (let i = 1; i < positions.length; i++) expect(positions[i]! - positions[i - 1]!).toBe(5);
  });

  test("no weight at all chooses nothing", () => {
    expect(pickSplit([0, 0], [0, 0])).toBeUndefined();
    expect(pickSplit([], [])).toBeUndefined();
  });

  test("chooseSplit keeps each path's round robin between requests", () => {
    const table = compileHostTable([
      routeIngress("qwen", [
        { revision: "qwen-00001", percent: 50 },
        { revision: "qwen-00002", percent: 50 },
      ]),
    ]);
    const match = matchHost(table, "qwen.team-a.example.com", "/v1/completions", {});
    if (match.kind !== "path") throw new Error("no path");
    const names = Array.from({ length: 4 }, () => chooseSplit(match.path)?.name);
    expect(names.filter((n) => n === "qwen-00001")).toHaveLength(2);
    expect(names.filter((n) => n === "qwen-00002")).toHaveLength(2);
  });
});
