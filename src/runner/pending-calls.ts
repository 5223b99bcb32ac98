// Calls sent to a runner (thread or process) and not yet answered, by message id: both
// placements answer them from messages and fail them all when the runner stops.
import { ModelportError } from "../errors.js";
import type { TensorMap } from "../tensor.js";

interface Pending {
  resolve(outputs: TensorMap): void;
  reject(err: Error): void;
}

export class PendingCalls {
  private readonly calls = new Map<number, Pending>();
  private nextId = 1;

  /** Registers a call; `send(id)` transmits it. @returns the promise of its answer. */
  open(send: (id: number) => void): Promise<TensorMap> {
    const id = this.nextId++;
    return new Promise<TensorMap>((resolve, reject) => {
      this.calls.set(id, { resolve, reject });
      try {
        send(id);
      } catch (err) {
        this.calls.delete(id);
        reject(err);
      }
    });
  }

  resolve(id: number, outputs: TensorMap): void {
    this.take(id)?.resolve(outputs);
  }

  reject(id: number, err: Error): void {
    this.take(id)?.reject(err);
  }

  /** Fails every open call with a retryable MP_ERR_RUNNER_CRASHED naming the model and why. */
  failAll(model: string, reason: string): void {
    for (const p of this.calls.values()) {
      p.reject(
        new ModelportError("MP_ERR_RUNNER_CRASHED", `the runner for ${model} stopped: ${reason}; retry`),
      );
    }
    this.calls.clear();
  }

  private take(id: number): Pending | undefined {
    const p = this.calls.get(id);
    this.calls.delete(id);
    return p;
  }
}
