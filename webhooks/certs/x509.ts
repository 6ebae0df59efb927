// @peculiar/x509 resolves its services through tsyringe, which needs the Reflect metadata API:
// load the polyfill first (ES modules evaluate their imports in order).
import "reflect-metadata";
import { createPrivateKey, randomBytes, webcrypto, X509Certificate } from "node:crypto";
import { isIP } from "node:net";
import * as x509 from "@peculiar/x509";

/**
 * Certificates for the webhook server, made in-process: ECDSA P-256 keys from Node's WebCrypto and
 * X.509 certificates from @peculiar/x509 (Node's crypto can parse and verify certificates but not
 * issue them). A CA signs a serving certificate for the Service's DNS names or the IPs of a `url`.
 */

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const algorithm = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;

export interface CertificatePem {
  certPem: string;
  keyPem: string;
}

export interface Validity {
  notBefore: Date;
  notAfter: Date;
}

export async function createCA(commonName: string, validity: Validity): Promise<CertificatePem> {
  const keys = await webcrypto.subtle.generateKey(algorithm, true, ["sign", "verify"]);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${commonName}`,
    ...validity,
    signingAlgorithm: algorithm,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString("pem"), keyPem: await privateKeyPem(keys.privateKey) };
}

/** A serving certificate for `hosts` (DNS names and IP addresses), signed by `ca`. */
export async function issueServingCert(
  ca: CertificatePem,
  hosts: string[],
  validity: Validity,
): Promise<CertificatePem> {
  const caCert = new x509.X509Certificate(ca.certPem);
  const caKey = await webcrypto.subtle.importKey("pkcs8", pemBody(ca.keyPem), algorithm, false, ["sign"]);
  const keys = await webcrypto.subtle.generateKey(algorithm, true, ["sign", "verify"]);
  const names = hosts.map((host) =>
    isIP(host) ? { type: "ip" as const, value: host } : { type: "dns" as const, value: host },
  );
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${hosts[0] ?? "snooze-webhooks"}`,
    issuer: caCert.subject,
    ...validity,
    signingAlgorithm: algorithm,
    publicKey: keys.publicKey,
    signingKey: caKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
      new x509.SubjectAlternativeNameExtension(names, false),
      await x509.AuthorityKeyIdentifierExtension.create(caCert, false),
    ],
  });
  return { certPem: cert.toString("pem"), keyPem: await privateKeyPem(keys.privateKey) };
}

/** What the rotation logic needs to know about a certificate, from Node's own X.509 parser. */
export interface CertificateFacts {
  notBefore: number;
  notAfter: number;
  fingerprint: string;
  isCA: boolean;
  pem: string;
}

export function certificateFacts(pem: string): CertificateFacts | undefined {
  try {
    const cert = new X509Certificate(pem);
    return {
      notBefore: Date.parse(cert.validFrom),
      notAfter: Date.parse(cert.validTo),
      fingerprint: cert.fingerprint256,
      isCA: cert.ca,
      pem: cert.toString(),
    };
  } catch {
    return undefined;
  }
}

/** Is `pem` signed by `caPem`, valid for every host, and does `keyPem` belong to it? */
export function servingCertMatches(pem: string, keyPem: string, caPem: string, hosts: string[]): boolean {
  try {
    const cert = new X509Certificate(pem);
    const ca = new X509Certificate(caPem);
    if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return false;
    if (!cert.checkPrivateKey(createPrivateKey(keyPem))) return false;
    return hosts.every((host) =>
      isIP(host) ? cert.checkIP(host) : cert.checkHost(host, { wildcards: false }),
    );
  } catch {
    return false;
  }
}

/** Splits a PEM bundle into its certificates. */
export function splitPem(bundle: string): string[] {
  return (
    bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)?.map((p) => `${p}\n`) ?? []
  );
}

async function privateKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey("pkcs8", key));
  const lines = der.toString("base64").match(/.{1,64}/g) ?? [];
  return `-----BEGIN PRIVATE KEY-----\n${lines.join("\n")}\n-----END PRIVATE KEY-----\n`;
}

function pemBody(pem: string): Buffer {
  return Buffer.from(pem.replace(/-----(BEGIN|END) [A-Z ]+-----/g, "").replace(/\s+/g, ""), "base64");
}

/** A positive 128-bit serial number, hex. */
function serial(): string {
  const bytes = randomBytes(16);
  bytes[0] = bytes[0]! & 0x7f;
  return bytes.toString("hex");
}
