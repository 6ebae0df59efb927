import { createSecureContext } from "node:tls";
import type { Logger } from "../../lib/log.ts";
import { maxPemFileBytes, readSmallFileSync } from "../../lib/small-file.ts";
import type { TlsPair } from "../server.ts";
import { CertStore, type CertStoreOptions } from "./cert-store.ts";
import { nextRotation } from "./rotation.ts";
import { certificateFacts } from "./x509.ts";

/** Where the serving certificate comes from, and how a new one reaches the running server. */
export interface CertificateSource {
  /** The first certificate; retries until it has one (or `signal` aborts). */
  initial(signal: AbortSignal): Promise<TlsPair>;
  /** Calls `onChange` whenever the certificate to serve changes. */
  watch(onChange: (tls: TlsPair) => void): void;
  stop(): void;
}

const fingerprint = (tls: TlsPair) => certificateFacts(tls.certPem)?.fingerprint ?? tls.certPem;

/**
 * Waits `ms` before a source's next try at its first certificate; a stop ends the wait at once (a
 * SIGTERM is not kept waiting for the next try) and the start with it.
 */
async function untilNextTry(ms: number, signal: AbortSignal): Promise<void> {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
  if (signal.aborted) throw new Error("stopped before the certificates were ready");
}

/**
 * Self-managed certificates (CertStore): reconciled at start, again when the next CA or serving
 * certificate is due, and every `resyncMs` in between, which picks up what other replicas wrote
 * and puts a CA bundle back that someone removed.
 */
export class SelfManagedCertificates implements CertificateSource {
  readonly #store: CertStore;
  readonly #log: Logger;
  readonly #resyncMs: number;
  readonly #now: () => number;
  readonly #policy: CertStoreOptions["policy"];
  #timer: NodeJS.Timeout | undefined;
  #current: TlsPair | undefined;
  #onChange: ((tls: TlsPair) => void) | undefined;
  #failures = 0;
  #stopped = false;

  constructor(options: CertStoreOptions & { resyncMs: number }) {
    this.#store = new CertStore(options);
    this.#log = options.log;
    this.#resyncMs = options.resyncMs;
    this.#now = options.now ?? Date.now;
    this.#policy = options.policy;
  }

  async initial(signal: AbortSignal): Promise<TlsPair> {
    for (;;) {
      try {
        const { serving, data } = await this.#store.reconcile();
        this.#current = serving;
        this.#schedule(nextRotation(data, this.#policy));
        return serving;
      } catch (error) {
        if (signal.aborted) throw new Error("stopped before the certificates were ready");
        this.#failures++;
        const delay = Math.min(10_000, 250 * 2 ** this.#failures);
        // The error itself, which the log shows with its cause: as a string, an API server that
        // refused the connection or whose certificate was not trusted said only `fetch failed`.
        this.#log.warn("could not set up the certificates; retrying", {
          error,
          retryInMs: delay,
        });
        await untilNextTry(delay, signal);
      }
    }
  }

  watch(onChange: (tls: TlsPair) => void) {
    this.#onChange = onChange;
  }

  #schedule(due: number) {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    const delay = Math.max(200, Math.min(this.#resyncMs, due - this.#now()));
    this.#timer = setTimeout(() => void this.#tick(), delay);
    this.#timer.unref();
  }

  async #tick() {
    try {
      const { serving, data } = await this.#store.reconcile();
      this.#failures = 0;
      if (!this.#current || fingerprint(serving) !== fingerprint(this.#current)) {
        this.#current = serving;
        this.#log.info("serving a new certificate", {
          notAfter: certificateFacts(serving.certPem)?.notAfter,
        });
        this.#onChange?.(serving);
      }
      this.#schedule(nextRotation(data, this.#policy));
    } catch (error) {
      this.#failures++;
      const delay = Math.min(this.#resyncMs, 250 * 2 ** this.#failures);
      this.#log.warn("certificate reconcile failed; keeping the current certificate", {
        error,
        retryInMs: delay,
      });
      this.#schedule(this.#now() + delay);
    }
  }

  stop() {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }
}

/**
 * Certificates from files, e.g. a Secret that cert-manager keeps renewed, mounted into the pod. The
 * files are read again every `reloadMs` (Secret volumes change by an atomic symlink swap, which
 * file watchers miss), and a changed pair is loaded without a restart.
 */
export class FileCertificates implements CertificateSource {
  readonly #certPath: string;
  readonly #keyPath: string;
  readonly #reloadMs: number;
  readonly #log: Logger;
  #timer: NodeJS.Timeout | undefined;
  #current: TlsPair | undefined;
  /** The last problem logged: the files are read every `reloadMs`, a problem is said once. */
  #said: string | undefined;

  constructor(options: { certPath: string; keyPath: string; reloadMs: number; log: Logger }) {
    this.#certPath = options.certPath;
    this.#keyPath = options.keyPath;
    this.#reloadMs = options.reloadMs;
    this.#log = options.log;
  }

  /**
   * Bounded and never blocking (readSmallFileSync): a named pipe given as --tls-cert kept a thread of
   * libuv's pool (four in all) waiting for good at every reload, until no file, DNS or crypto work
   * was done, and /dev/zero was read on and on (found by an outside tester).
   */
  async #read(): Promise<TlsPair> {
    const read = (flag: string, path: string) => {
      try {
        return readSmallFileSync(path, maxPemFileBytes).toString("utf8");
      } catch (error) {
        throw new Error(`cannot read --${flag} ${path}: ${(error as Error).message}`);
      }
    };
    return { certPem: read("tls-cert", this.#certPath), keyPem: read("tls-key", this.#keyPath) };
  }

  /**
   * Why the pair cannot be served, naming both flags, or undefined: a certificate and a key that do
   * not belong together (a rotation caught between its two files, a copy of the wrong key), or text
   * that is no PEM, which the server's TLS setup would refuse.
   */
  #unusable(tls: TlsPair): string | undefined {
    try {
      createSecureContext({ cert: tls.certPem, key: tls.keyPem });
      return undefined;
    } catch (error) {
      return `--tls-cert ${this.#certPath} and --tls-key ${this.#keyPath} are not a pair that can be served: ${(error as Error).message}`;
    }
  }

  /** Logs `problem` when it is not the one logged last (undefined: all is well again). */
  #say(message: string, problem: string | undefined) {
    if (problem !== undefined && problem !== this.#said)
      this.#log.warn(message, { error: problem, retryInMs: this.#reloadMs });
    this.#said = problem;
  }

  /**
   * Reads the files every `reloadMs` until they are a pair that can be served: the webhooks stay
   * unready meanwhile and say why once. Found by an outside tester: the first bad read (a key that
   * was not the certificate's, a file not there yet) left them unready for good, the files never
   * read again once fixed.
   */
  async initial(signal: AbortSignal): Promise<TlsPair> {
    for (;;) {
      let problem: string;
      try {
        const tls = await this.#read();
        const unusable = this.#unusable(tls);
        if (unusable === undefined) {
          this.#say("", undefined);
          this.#current = tls;
          return tls;
        }
        problem = unusable;
      } catch (error) {
        problem = (error as Error).message;
      }
      this.#say("cannot serve the certificate files yet; reading them again every --cert-reload", problem);
      await untilNextTry(this.#reloadMs, signal);
    }
  }

  watch(onChange: (tls: TlsPair) => void) {
    this.#timer = setInterval(async () => {
      try {
        const next = await this.#read();
        if (this.#current && next.certPem === this.#current.certPem && next.keyPem === this.#current.keyPem)
          return;
        // An empty file is one being written (opened, not yet filled: a copy, a `kubectl cp`), not a
        // certificate: the next read sees it whole. Handed over, it failed as a bad pair meanwhile.
        if (next.certPem.trim() === "" || next.keyPem.trim() === "") return;
        // Not a pair (a rotation's first file written, its second not yet): the current one is
        // served on, and the files are read again at the next reload.
        const unusable = this.#unusable(next);
        this.#say(
          "the certificate files changed to a pair that cannot be served; keeping the current certificate",
          unusable,
        );
        if (unusable !== undefined) return;
        this.#current = next;
        this.#log.info("certificate files changed; serving the new certificate");
        onChange(next);
      } catch (error) {
        this.#say("could not read the certificate files; keeping the current certificate", String(error));
      }
    }, this.#reloadMs);
    this.#timer.unref();
  }

  stop() {
    clearInterval(this.#timer);
  }
}
