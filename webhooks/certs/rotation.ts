import { createPrivateKey, X509Certificate } from "node:crypto";
import { certificateFacts, servingCertMatches } from "./x509.ts";

/**
 * When to make a new CA or serving certificate, and which CAs the webhook configurations trust;
 * pure (the clock is a parameter). What the Secret holds:
 *
 * - `ca.crt`: the bundle, every CA still trusted, newest first;
 * - `ca.key`: the key of the newest CA (the only one that signs);
 * - `tls.crt`, `tls.key`: the serving certificate and its key.
 *
 * A new CA joins the bundle when the newest has a third of its life left; the serving certificate
 * is renewed when a third of its life is left, and is signed by the newest CA only after the
 * webhook configurations trust it (see cert-store.ts). CAs leave the bundle when they expire.
 */
export interface CertData {
  bundle: string[];
  caKey?: string;
  cert?: string;
  key?: string;
}

export interface RotationPolicy {
  caValidityMs: number;
  certValidityMs: number;
  /** DNS names and IPs the serving certificate must cover. */
  hosts: string[];
}

/** Clocks differ between machines: certificates are valid from a little before they are made. */
export const clockSkewMs = 5 * 60_000;

const notAfter = (pem: string) => certificateFacts(pem)?.notAfter ?? 0;

/** CAs that have not expired, newest first, without duplicates. */
export function liveBundle(pems: string[], now: number): string[] {
  const seen = new Set<string>();
  const live: { pem: string; notBefore: number }[] = [];
  for (const pem of pems) {
    const facts = certificateFacts(pem);
    if (!facts?.isCA || facts.notAfter <= now || seen.has(facts.fingerprint)) continue;
    seen.add(facts.fingerprint);
    live.push({ pem: facts.pem, notBefore: facts.notBefore });
  }
  return live.sort((a, b) => b.notBefore - a.notBefore).map((c) => c.pem);
}

/** What the webhook configurations should trust: their CAs and the Secret's, less the expired. */
export function mergeBundles(configured: string[], secret: string[], now: number): string[] {
  return liveBundle([...secret, ...configured], now);
}

/** The newest CA can sign: its key is there and matches, and it has more than a third of its life left. */
export function needsNewCA(data: CertData, now: number, policy: RotationPolicy): boolean {
  const newest = liveBundle(data.bundle, now)[0];
  if (!newest || !data.caKey || newest !== liveBundle(data.bundle, 0)[0]) return true;
  try {
    if (!new X509Certificate(newest).checkPrivateKey(createPrivateKey(data.caKey))) return true;
  } catch {
    return true;
  }
  return now >= notAfter(newest) - policy.caValidityMs / 3;
}

/** A serving certificate that a CA of the bundle signed for every host, and that has not expired. */
export function usableServingCert(data: CertData, now: number, policy: RotationPolicy): boolean {
  if (!data.cert || !data.key) return false;
  const facts = certificateFacts(data.cert);
  if (!facts || facts.notAfter <= now || facts.notBefore > now) return false;
  return liveBundle(data.bundle, now).some((ca) =>
    servingCertMatches(data.cert!, data.key!, ca, policy.hosts),
  );
}

export function needsNewServingCert(data: CertData, now: number, policy: RotationPolicy): boolean {
  if (!usableServingCert(data, now, policy)) return true;
  return now >= notAfter(data.cert!) - policy.certValidityMs / 3;
}

/** When the next CA or serving certificate is due. */
export function nextRotation(data: CertData, policy: RotationPolicy): number {
  const newest = data.bundle[0];
  const caDue = newest ? notAfter(newest) - policy.caValidityMs / 3 : 0;
  const certDue = data.cert ? notAfter(data.cert) - policy.certValidityMs / 3 : 0;
  return Math.min(caDue, certDue);
}

/** Validity of a new serving certificate: never past the CA that signs it. */
export function servingValidity(caPem: string, now: number, policy: RotationPolicy) {
  return {
    notBefore: new Date(now - clockSkewMs),
    notAfter: new Date(Math.min(now + policy.certValidityMs, notAfter(caPem))),
  };
}

export function caValidity(now: number, policy: RotationPolicy) {
  return { notBefore: new Date(now - clockSkewMs), notAfter: new Date(now + policy.caValidityMs) };
}
