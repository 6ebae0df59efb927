import { describe, expect, it } from "vitest";
import { defaultStreamLimits, peerHost, StreamCap, streamRefusal } from "./stream-cap.ts";

describe("the StreamIsActive cap", () => {
  it("reads the client address from grpc-js's peer, whatever its port", () => {
    expect(peerHost("10.0.0.7:51234")).toBe("10.0.0.7");
    expect(peerHost("::ffff:10.0.0.7:51234")).toBe("::ffff:10.0.0.7");
    expect(peerHost("unknown")).toBe("unknown");
  });

  it("refuses past the per-address limit first, then past the total, naming the limit", () => {
    const limits = { total: 5, perPeer: 2 };
    expect(streamRefusal({ total: 1, fromPeer: 1 }, "10.0.0.7", limits)).toBeUndefined();
    expect(streamRefusal({ total: 2, fromPeer: 2 }, "10.0.0.7", limits)).toContain(
      "10.0.0.7 has 2 StreamIsActive streams open, the limit per client address",
    );
    expect(streamRefusal({ total: 5, fromPeer: 0 }, "10.0.0.8", limits)).toContain(
      "has 5 StreamIsActive streams open, its limit",
    );
  });

  it("one client that fills its share leaves room for another; a release (once) frees its place", () => {
    const cap = new StreamCap({ total: 3, perPeer: 2 });
    const a1 = cap.open("a");
    const a2 = cap.open("a");
    expect(cap.open("a")).toHaveProperty("refusal");
    const keda = cap.open("keda");
    expect(keda).toHaveProperty("release");
    expect(cap.open("keda")).toHaveProperty("refusal");
    if (!("release" in a1) || !("release" in a2)) throw new Error("expected a place");
    a1.release();
    a1.release();
    expect(cap.size).toBe(2);
    expect(cap.open("keda")).toHaveProperty("release");
    a2.release();
    expect(cap.size).toBe(2);
  });

  it("by default leaves a real KEDA room: a connection's streams below the total", () => {
    expect(defaultStreamLimits.perPeer).toBeLessThan(defaultStreamLimits.total);
    expect(defaultStreamLimits.perPeer).toBeGreaterThanOrEqual(2_048);
  });
});
