import { beforeAll, describe, expect, test } from "vitest";
import {
  type CertData,
  liveBundle,
  mergeBundles,
  needsNewCA,
  needsNewServingCert,
  nextRotation,
  type RotationPolicy,
  servingValidity,
} from "./rotation.ts";
import { type CertificatePem, certificateFacts, createCA, issueServingCert, splitPem } from "./x509.ts";

const hour = 3_600_000;
const t0 = Date.parse("2026-01-01T00:00:00Z");
const policy: RotationPolicy = {
  caValidityMs: 90 * hour,
  certValidityMs: 30 * hour,
  hosts: ["snooze-webhooks.snooze-system.svc", "127.0.0.1"],
};
const span = (from: number, ms: number) => ({ notBefore: new Date(from), notAfter: new Date(from + ms) });

let ca: CertificatePem;
let olderCa: CertificatePem;
let serving: CertificatePem;
let data: CertData;

beforeAll(async () => {
  ca = await createCA("ca", span(t0, policy.caValidityMs));
  olderCa = await createCA("older", span(t0 - 60 * hour, policy.caValidityMs));
  serving = await issueServingCert(ca, policy.hosts, span(t0, policy.certValidityMs));
  data = { bundle: [ca.certPem], caKey: ca.keyPem, cert: serving.certPem, key: serving.keyPem };
});

describe("rotation decisions", () => {
  test("nothing yet: a CA and a serving certificate are needed", () => {
    expect(needsNewCA({ bundle: [] }, t0, policy)).toBe(true);
    expect(needsNewServingCert({ bundle: [] }, t0, policy)).toBe(true);
  });

  test.each([
    { at: 1, ca: false, cert: false },
    { at: 19, ca: false, cert: false },
    { at: 21, ca: false, cert: true }, // a third of 30 h left
    { at: 59, ca: false, cert: true },
    { at: 61, ca: true, cert: true }, // a third of 90 h left
    { at: 91, ca: true, cert: true }, // expired
  ])("at t0+$at h: new CA $ca, new serving certificate $cert", ({ at, ca: newCA, cert }) => {
    expect(needsNewCA(data, t0 + at * hour, policy)).toBe(newCA);
    expect(needsNewServingCert(data, t0 + at * hour, policy)).toBe(cert);
  });

  test("a serving certificate for other hosts, or from an unknown CA, or with the wrong key is replaced", async () => {
    const otherHosts = await issueServingCert(ca, ["elsewhere.svc"], span(t0, policy.certValidityMs));
    expect(
      needsNewServingCert({ ...data, cert: otherHosts.certPem, key: otherHosts.keyPem }, t0 + hour, policy),
    ).toBe(true);
    const stranger = await createCA("stranger", span(t0, policy.caValidityMs));
    const foreign = await issueServingCert(stranger, policy.hosts, span(t0, policy.certValidityMs));
    expect(
      needsNewServingCert({ ...data, cert: foreign.certPem, key: foreign.keyPem }, t0 + hour, policy),
    ).toBe(true);
    expect(needsNewServingCert({ ...data, key: otherHosts.keyPem }, t0 + hour, policy)).toBe(true);
  });

  test("a CA key that does not belong to the newest CA means a new CA", () => {
    expect(needsNewCA({ ...data, caKey: olderCa.keyPem }, t0 + hour, policy)).toBe(true);
    expect(needsNewCA({ ...data, caKey: "garbage" }, t0 + hour, policy)).toBe(true);
  });

  test("a serving certificate signed by an older CA still in the bundle stays usable", async () => {
    const byOlder = await issueServingCert(olderCa, policy.hosts, span(t0, policy.certValidityMs));
    const rolled = {
      bundle: [ca.certPem, olderCa.certPem],
      caKey: ca.keyPem,
      cert: byOlder.certPem,
      key: byOlder.keyPem,
    };
    expect(needsNewServingCert(rolled, t0 + hour, policy)).toBe(false);
    expect(needsNewServingCert({ ...rolled, bundle: [ca.certPem] }, t0 + hour, policy)).toBe(true);
  });

  test("the next rotation is when the first of the two is due", () => {
    expect(nextRotation(data, policy)).toBe(t0 + 20 * hour);
  });

  test("a serving certificate never outlives its CA", () => {
    const validity = servingValidity(ca.certPem, t0 + 80 * hour, policy);
    expect(validity.notAfter.getTime()).toBe(t0 + 90 * hour);
    expect(validity.notBefore.getTime()).toBeLessThan(t0 + 80 * hour);
  });
});

describe("bundles", () => {
  // Bundles hold certificates as Node's parser writes them.
  const n = (pem: string) => certificateFacts(pem)!.pem;
  test("expired CAs leave, duplicates go, the newest comes first; serving certificates are not CAs", () => {
    const now = t0 + hour;
    expect(liveBundle([olderCa.certPem, ca.certPem, ca.certPem, serving.certPem], now)).toEqual([
      n(ca.certPem),
      n(olderCa.certPem),
    ]);
    expect(liveBundle([olderCa.certPem, ca.certPem], t0 + 31 * hour)).toEqual([n(ca.certPem)]);
  });

  test("merging never drops a live CA the configuration trusts (a stale replica cannot untrust a new CA)", () => {
    const now = t0 + hour;
    expect(mergeBundles([ca.certPem], [olderCa.certPem], now)).toEqual([n(ca.certPem), n(olderCa.certPem)]);
    expect(mergeBundles([ca.certPem, olderCa.certPem], [ca.certPem], t0 + 40 * hour)).toEqual([
      n(ca.certPem),
    ]);
  });

  test("PEM bundles split into certificates that Node's parser reads", () => {
    const parts = splitPem(`${ca.certPem}${olderCa.certPem}`);
    expect(parts).toHaveLength(2);
    expect(certificateFacts(parts[0]!)?.isCA).toBe(true);
    expect(certificateFacts(serving.certPem)?.isCA).toBe(false);
    expect(certificateFacts("not a certificate")).toBeUndefined();
  });
});
