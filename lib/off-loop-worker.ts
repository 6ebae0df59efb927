import { isMainThread, parentPort, Worker } from "node:worker_threads";

/** A question the worker took longer than its time limit over: the worker was ended under it. */
export class OffLoopTimeout extends Error {
  readonly timeoutMs: number;

  constructor(timeoutMs: number) {
    super(`the worker thread gave no answer within ${timeoutMs} ms`);
    this.name = "OffLoopTimeout";
    this.timeoutMs = timeoutMs;
  }
}

export interface OffLoopWorkerOptions {
  /**
   * Kept once started, for the next question (large request bodies come often), or ended as soon as
   * it has no question left (a settings reload is rare, and an idle worker holds a V8 heap of its own).
   */
  keep: boolean;
}

/**
 * A worker thread that work too slow for the event loop is sent to (a large JSON body, a large
 * settings file), so the loop goes on serving everyone else meanwhile. One worker per script,
 * started with the first question; questions are answered by id, in any number at once. The worker
 * script answers with `answerOffLoop`.
 *
 * Should the worker fail (or not start), its questions get no answer (`undefined`): the caller does
 * the work itself, and the next question gets a new worker.
 */
export class OffLoopWorker<Question, Answer> {
  private worker: Worker | undefined;
  private nextId = 0;
  /**
   * The questions sent, by id, with the worker they went to: each resolves with its answer, or
   * undefined if that worker failed (an ended worker's exit must not fail a newer one's questions).
   */
  private readonly pending = new Map<number, { resolve: (answer: Answer | undefined) => void; to: Worker }>();

  private readonly script: URL;
  private readonly options: OffLoopWorkerOptions;

  constructor(script: URL, options: OffLoopWorkerOptions) {
    this.script = script;
    this.options = options;
  }

  /**
   * The worker's answer to `question`, or undefined when the worker failed. With `timeoutMs`, a
   * worker that has not answered by then is ended (its other questions get no answer) and this
   * rejects with `OffLoopTimeout`: what it was doing is not done here instead, as it could hold
   * the event loop for as long.
   */
  async ask(question: Question, { timeoutMs }: { timeoutMs?: number } = {}): Promise<Answer | undefined> {
    const id = this.nextId++;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await new Promise<Answer | undefined>((resolve, reject) => {
        // Ref'd while a question waits on it: the process does not exit under a request.
        const thread = this.thread();
        this.pending.set(id, { resolve, to: thread });
        thread.ref();
        thread.postMessage({ id, question });
        if (timeoutMs !== undefined)
          timer = setTimeout(() => {
            this.pending.delete(id);
            reject(new OffLoopTimeout(timeoutMs));
            this.end(thread);
          }, timeoutMs);
      });
    } catch (error) {
      if (error instanceof OffLoopTimeout) throw error;
      // A worker that could not start: the caller does the work, as for one that failed.
      return undefined;
    } finally {
      clearTimeout(timer);
      this.pending.delete(id);
      if (this.pending.size === 0) this.idle();
    }
  }

  private idle(): void {
    if (!this.worker) return;
    if (this.options.keep) {
      this.worker.unref();
      return;
    }
    this.end(this.worker);
  }

  /** Ends `thread`: its questions get no answer, and the next question starts a new worker. */
  private end(thread: Worker): void {
    if (this.worker === thread) this.worker = undefined;
    void thread.terminate();
  }

  /** The worker, started with the first question, not keeping the process alive when idle. */
  private thread(): Worker {
    if (this.worker) return this.worker;
    // No resourceLimits: a worker past its limit inside JSON.parse aborts the whole process (V8 cannot
    // stop it there), sooner than the process's own heap would (seen with a limit of 64 MB).
    const started = new Worker(this.script);
    started.unref();
    started.on("message", ({ id, answer }: { id: number; answer: Answer }) => {
      this.pending.get(id)?.resolve(answer);
      this.pending.delete(id);
    });
    const ended = () => {
      if (this.worker === started) this.worker = undefined;
      for (const [id, { resolve, to }] of this.pending) {
        if (to !== started) continue;
        resolve(undefined);
        this.pending.delete(id);
      }
    };
    started.on("error", ended);
    started.on("exit", ended);
    this.worker = started;
    return started;
  }
}

/** In a worker script of an `OffLoopWorker`: answers each question with `answer(question)`. */
export function answerOffLoop<Question, Answer>(answer: (question: Question) => Answer): void {
  if (isMainThread || !parentPort) throw new Error("answerOffLoop runs in a worker thread");
  const port = parentPort;
  port.on("message", ({ id, question }: { id: number; question: Question }) => {
    port.postMessage({ id, answer: answer(question) });
  });
}
