/**
 * Requests to the kernel that wait for an answer (the comm's `validate`): each under its own id, sent again every
 * `resendMs` until its answer comes or the comm closes, so a request the kernel never saw (a comm message dropped
 * while the kernel had not handled the comm's opening, its main shell busy) is never shown as lost. The first
 * answer for an id counts; later ones for it are ignored. Pure: the sending and the timers are handed in.
 */

export interface Timers {
  setInterval(fn: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
}

interface Pending<T> {
  resolve(value: T): void;
  reject(error: Error): void;
  resend: unknown;
}

export class PendingRequests<T> {
  constructor(
    readonly resendMs: number,
    private readonly timers: Timers = {
      setInterval: (fn, ms) => setInterval(fn, ms),
      clearInterval: handle => clearInterval(handle as ReturnType<typeof setInterval>)
    }
  ) {}

  /** How many wait for their answer. */
  get size(): number {
    return this._pending.size;
  }

  /**
   * Send `build(id)` with `send` now and again every `resendMs`; resolves with the answer `answer(id, ...)` gives.
   * `send` returning false (no comm to send on) rejects at once with `closed()`.
   */
  ask(build: (id: number) => unknown, send: (request: unknown) => boolean, closed: () => Error): Promise<T> {
    const id = ++this._lastId;
    const request = build(id);
    return new Promise<T>((resolve, reject) => {
      if (!send(request)) {
        reject(closed());
        return;
      }
      const resend = this.timers.setInterval(() => send(request), this.resendMs);
      this._pending.set(id, { resolve, reject, resend });
    });
  }

  /** The kernel's answer for `id`: true when a request waited for it. */
  answer(id: number, value: T): boolean {
    const pending = this._take(id);
    pending?.resolve(value);
    return pending !== undefined;
  }

  /** The comm closed or the kernel restarted: every request still waiting fails with `error()`. */
  rejectAll(error: () => Error): void {
    for (const id of [...this._pending.keys()]) {
      this._take(id)?.reject(error());
    }
  }

  private _take(id: number): Pending<T> | undefined {
    const pending = this._pending.get(id);
    if (pending) {
      this._pending.delete(id);
      this.timers.clearInterval(pending.resend);
    }
    return pending;
  }

  private _lastId = 0;
  private _pending = new Map<number, Pending<T>>();
}

/**
 * Whether the kernel's reply to a comm message says it went to a subshell the kernel does not have (ipykernel 7
 * answers such a message with this error and drops it): every later message on that comm would be dropped too.
 */
export function lostSubshell(content: unknown): boolean {
  const reply = content as { status?: unknown; ename?: unknown } | null;
  return reply?.status === 'error' && reply.ename === 'UnknownSubshellError';
}
