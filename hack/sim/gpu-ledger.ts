/**
 * The simulated GPU: every engine started with the same `--gpu-id` on one
 * machine draws from one memory budget, across processes, because the local
 * platform runs one `snooze sim` process per model.
 *
 * A device is a directory (`<dir>/gpu-<id>/`) holding one claim file per engine
 * that holds memory, written atomically (temp file + rename). A claim whose
 * process is dead counts for nothing and is swept away. Check-and-claim runs
 * under a lock file created with O_EXCL, held for microseconds; all of it is
 * synchronous so engines in one process cannot interleave either.
 */
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { makeDirectory } from "../../lib/make-directory.ts";
import { readProcStat } from "../../lib/proc-stat.ts";
import { readSmallFileSync } from "../../lib/small-file.ts";

/** Overrides the default ledger directory, so test runs isolate themselves. */
export const gpuDirEnv = "SNOOZE_SIM_GPU_DIR";

export function defaultGpuDir(): string {
  return process.env[gpuDirEnv] || path.join(os.tmpdir(), "snooze-sim-gpu");
}

/** The largest claim or lock file read: one is some 100 bytes of JSON, a lock a pid. */
const maxClaimBytes = 64 * 1024;

export interface Claim {
  pid: number;
  bytes: number;
  /** Who holds it, for humans reading the directory or an error message. */
  holder: string;
}

export interface ClaimResult {
  ok: boolean;
  /** Bytes held by live engines other than the caller. */
  usedByOthers: number;
  others: Claim[];
}

const lockWaitMs = 5_000;
const staleLockMs = 10_000;
const sleepCell = new Int32Array(new SharedArrayBuffer(4));

/** One engine's handle on one simulated device. */
export class GpuClaim {
  readonly deviceDir: string;
  readonly totalBytes: number;
  private readonly file: string;
  private readonly holder: string;
  private held = 0;

  constructor(options: { dir: string; gpuId: string; totalBytes: number; holder: string }) {
    this.deviceDir = path.join(options.dir, `gpu-${options.gpuId.replace(/[^\w.-]/g, "_")}`);
    this.totalBytes = options.totalBytes;
    this.holder = options.holder;
    const key = `${process.pid}-${randomBytes(4).toString("hex")}`;
    this.file = path.join(this.deviceDir, `claim-${key}.json`);
    makeDirectory(this.deviceDir);
    ownClaims.add(this);
  }

  /** Bytes this engine holds now. */
  get bytes(): number {
    return this.held;
  }

  /**
   * Holds `bytes` in total from now on. Growing fails (and changes nothing) when
   * live neighbours leave too little room; shrinking always succeeds.
   */
  set(bytes: number): ClaimResult {
    return withLock(this.deviceDir, () => {
      const others = liveClaims(this.deviceDir, this.file);
      const usedByOthers = others.reduce((sum, claim) => sum + claim.bytes, 0);
      if (bytes > this.held && usedByOthers + bytes > this.totalBytes)
        return { ok: false, usedByOthers, others };
      this.write(bytes);
      return { ok: true, usedByOthers, others };
    });
  }

  /** Lets go of everything; safe to call more than once and at process exit. */
  release(): void {
    if (this.held === 0) return;
    this.held = 0;
    try {
      fs.unlinkSync(this.file);
    } catch {
      // Already gone: a sweep by another process or a second release.
    }
  }

  /** The claim is gone for good: the engine closed. */
  dispose(): void {
    this.release();
    ownClaims.delete(this);
  }

  private write(bytes: number): void {
    if (bytes === 0) {
      this.release();
      return;
    }
    const claim: Claim = { pid: process.pid, bytes, holder: this.holder };
    const temp = `${this.file}.${randomBytes(4).toString("hex")}.tmp`;
    fs.writeFileSync(temp, JSON.stringify(claim));
    fs.renameSync(temp, this.file);
    this.held = bytes;
  }
}

/** Claims of live processes on a device, without the caller's own file; sweeps dead ones. */
export function liveClaims(deviceDir: string, exceptFile?: string): Claim[] {
  const claims: Claim[] = [];
  let names: string[];
  try {
    names = fs.readdirSync(deviceDir);
  } catch {
    return claims;
  }
  for (const name of names) {
    if (!name.startsWith("claim-") || !name.endsWith(".json")) continue;
    const file = path.join(deviceDir, name);
    if (file === exceptFile) continue;
    let claim: Claim;
    try {
      // Bounded and never blocking: a named pipe named like a claim hung every `snooze sim` on the
      // device at start, silent and deaf to SIGTERM (found by an outside tester); the default
      // directory is under /tmp, where anyone may put one.
      claim = JSON.parse(readSmallFileSync(file, maxClaimBytes).toString("utf8")) as Claim;
    } catch {
      continue; // Vanished between readdir and read, or not a claim at all.
    }
    if (!processAlive(claim.pid)) {
      fs.rmSync(file, { force: true });
      continue;
    }
    claims.push(claim);
  }
  return claims;
}

function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: alive but someone else's.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
  // A process that exited and waits to be reaped (a zombie) holds no GPU memory: the driver frees
  // it at exit, so a killed engine's claim ends at once even if nobody reaped it yet.
  return !exited(pid);
}

/** Linux: the process is a zombie (state Z or X in /proc/<pid>/stat). Elsewhere: unknown, so no. */
function exited(pid: number): boolean {
  const state = readProcStat(pid)?.state;
  return state === "Z" || state === "X";
}

function withLock<T>(deviceDir: string, work: () => T): T {
  const lock = path.join(deviceDir, ".lock");
  const deadline = Date.now() + lockWaitMs;
  for (let attempt = 0; ; attempt++) {
    try {
      const fd = fs.openSync(lock, "wx");
      fs.writeSync(fd, String(process.pid));
      fs.closeSync(fd);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      if (lockIsStale(lock)) {
        fs.rmSync(lock, { force: true });
        continue;
      }
      if (Date.now() > deadline)
        throw new Error(`simulated GPU lock ${lock} stayed taken for ${lockWaitMs}ms`);
      Atomics.wait(sleepCell, 0, 0, Math.min(1 + attempt, 10));
    }
  }
  try {
    return work();
  } finally {
    fs.rmSync(lock, { force: true });
  }
}

function lockIsStale(lock: string): boolean {
  try {
    const pid = Number(readSmallFileSync(lock, maxClaimBytes).toString("utf8"));
    // An empty file is a lock being written right now, unless it is old.
    if (pid > 0 && !processAlive(pid)) return true;
    return Date.now() - fs.statSync(lock).mtimeMs > staleLockMs;
  } catch {
    return false;
  }
}

/** Every claim this process holds, released when it exits however it exits. */
const ownClaims = new Set<GpuClaim>();
process.on("exit", () => {
  for (const claim of ownClaims) claim.release();
});
