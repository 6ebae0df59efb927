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
        // The wait ends early at a stop: a SIGTERM is not kept waiting for the next try.
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delay);
          const stop = () => {
            clearTimeout(timer);
            resolve();
          };
          signal.addEventListener("abort", stop, { once: true });
        });
        if (signal.aborted) throw new Error("stopped before the certificates were ready");
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

  async initial(): Promise<TlsPair> {
    this.#current = await this.#read();
    return this.#current;
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
        this.#current = next;
        this.#log.info("certificate files changed; serving the new certificate");
        onChange(next);
      } catch (error) {
        this.#log.warn("could not read the certificate files; keeping the current certificate", {
          error: String(error),
        });
      }
    }, this.#reloadMs);
    this.#timer.unref();
  }

  stop() {
    clearInterval(this.#timer);
  }
}
