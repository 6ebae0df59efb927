import { execFile } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * Certificates for the test control plane, made with the openssl CLI (Node's crypto makes keys but
 * cannot sign X.509 certificates). Short-lived ECDSA P-256, like envtest's tiny CA.
 */
export interface CertificateAuthority {
  name: string;
  certPath: string;
  keyPath: string;
  certPem: string;
}

export interface IssuedCert {
  certPath: string;
  keyPath: string;
  certPem: string;
  keyPem: string;
}

export interface CertRequest {
  commonName: string;
  /** Subject organizations: Kubernetes reads them as the user's groups. */
  organizations?: string[];
  ipAddresses?: string[];
  dnsNames?: string[];
  /** "both": server and client authentication (KEDA's operator and adapter share one mTLS pair). */
  usage: "server" | "client" | "both";
}

const days = "2";

export async function createCA(dir: string, name: string): Promise<CertificateAuthority> {
  const certPath = join(dir, `${name}.crt`);
  const keyPath = join(dir, `${name}.key`);
  await run("openssl", [
    "req",
    "-x509",
    "-new",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-keyout",
    keyPath,
    "-out",
    certPath,
    "-days",
    days,
    "-subj",
    `/CN=${subjectValue(name)}`,
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
  ]);
  return { name, certPath, keyPath, certPem: await readFile(certPath, "utf8") };
}

/** A certificate signed by `ca`, written as `<dir>/<fileName>.crt` and `.key`. */
export async function issueCert(
  ca: CertificateAuthority,
  dir: string,
  fileName: string,
  request: CertRequest,
): Promise<IssuedCert> {
  const certPath = join(dir, `${fileName}.crt`);
  const keyPath = join(dir, `${fileName}.key`);
  const csrPath = join(dir, `${fileName}.csr`);
  const extPath = join(dir, `${fileName}.ext`);
  const subject = [
    `/CN=${subjectValue(request.commonName)}`,
    ...(request.organizations ?? []).map((o) => `/O=${subjectValue(o)}`),
  ].join("");
  await run("openssl", [
    "req",
    "-new",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-keyout",
    keyPath,
    "-out",
    csrPath,
    "-subj",
    subject,
  ]);
  const sans = [
    ...(request.ipAddresses ?? []).map((ip) => `IP:${ip}`),
    ...(request.dnsNames ?? []).map((dns) => `DNS:${dns}`),
  ];
  const extensions = [
    "basicConstraints=critical,CA:FALSE",
    "keyUsage=critical,digitalSignature,keyEncipherment",
    `extendedKeyUsage=${{ server: "serverAuth", client: "clientAuth", both: "serverAuth,clientAuth" }[request.usage]}`,
    ...(sans.length > 0 ? [`subjectAltName=${sans.join(",")}`] : []),
  ];
  await writeFile(extPath, `${extensions.join("\n")}\n`);
  await run("openssl", [
    "x509",
    "-req",
    "-in",
    csrPath,
    "-CA",
    ca.certPath,
    "-CAkey",
    ca.keyPath,
    "-set_serial",
    `0x${randomBytes(16).toString("hex")}`,
    "-days",
    days,
    "-sha256",
    "-extfile",
    extPath,
    "-out",
    certPath,
  ]);
  return {
    certPath,
    keyPath,
    certPem: await readFile(certPath, "utf8"),
    keyPem: await readFile(keyPath, "utf8"),
  };
}

/** The key pair that signs and verifies ServiceAccount tokens (ES256). */
export async function createServiceAccountKey(
  dir: string,
): Promise<{ privatePath: string; publicPath: string }> {
  const { privateKey, publicKey } = generateKeyPairSync("ec", {
    namedCurve: "P-256",
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
    publicKeyEncoding: { type: "spki", format: "pem" },
  });
  const privatePath = join(dir, "service-account.key");
  const publicPath = join(dir, "service-account.pub");
  await writeFile(privatePath, privateKey, { mode: 0o600 });
  await writeFile(publicPath, publicKey);
  return { privatePath, publicPath };
}

// openssl's -subj syntax separates fields with "/" and treats "\" and "+" specially.
function subjectValue(value: string): string {
  if (/[/\\+=]/.test(value)) throw new Error(`unsupported character in certificate subject: ${value}`);
  return value;
}
