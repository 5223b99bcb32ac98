// Opens the job store when it is first needed: a server that never receives a job creates no
// SQLite file, while one restarted over an existing store (or using Redis) opens it at once so
// queued jobs continue.
import type { JobStatus } from "./job.js";
import type { JobStore } from "./job-store.js";

const EMPTY_COUNTS: Record<JobStatus, number> = {
  queued: 0,
  running: 0,
  succeeded: 0,
  failed: 0,
  canceled: 0,
};

/**
 * A JobStore that opens the real one (via `open`) at once when `openNow`, else on the first write;
 * until then reads answer as an empty store would.
 */
export function lazyJobStore(open: () => Promise<JobStore>, openNow: boolean): JobStore {
  let store: Promise<JobStore> | undefined;
  const start = () => {
    const opening = open();
    store = opening;
    // A failed open surfaces on this use and is tried again on the next (Redis may come up
    // later); it must not also crash the process as an unhandled rejection.
    opening.catch(() => {
      if (store === opening) store = undefined;
    });
    return opening;
  };
  if (openNow) start();
  const real = () => store ?? start();
  // Before the first write a store that opens lazily reads as empty; one opened at once (shared
  // Redis) is opened again by any use after a failure.
  const ifOpen = <T>(fn: (s: JobStore) => Promise<T>, empty: T): Promise<T> => {
    const current = store ?? (openNow ? start() : undefined);
    return current ? current.then(fn) : Promise.resolve(empty);
  };
  return {
    create: (job, now) => real().then((s) => s.create(job, now)),
    record: (job, now) => real().then((s) => s.record(job, now)),
    remove: (id) => ifOpen((s) => s.remove(id), undefined),
    get: (id) => ifOpen((s) => s.get(id), undefined),
    state: (id) => ifOpen((s) => s.state(id), undefined),
    queuedCount: (model) => ifOpen((s) => s.queuedCount(model), 0),
    activeCount: (owner) => ifOpen((s) => s.activeCount(owner), 0),
    list: (q) => ifOpen((s) => s.list(q), { jobs: [] }),
    claim: (w, models, lease, now) => ifOpen((s) => s.claim(w, models, lease, now), undefined),
    renew: (id, w, lease, now) => ifOpen((s) => s.renew(id, w, lease, now), false),
    complete: (id, w, r, now) => ifOpen((s) => s.complete(id, w, r, now), false),
    fail: (id, w, e, retryAt, now) => ifOpen((s) => s.fail(id, w, e, retryAt, now), false),
    release: (id, w, now) => ifOpen((s) => s.release(id, w, now), false),
    cancel: (id, now) => ifOpen((s) => s.cancel(id, now), undefined),
    markCanceled: (id, w, now) => ifOpen((s) => s.markCanceled(id, w, now), false),
    retry: (id, now) => ifOpen((s) => s.retry(id, now), undefined),
    recordWebhook: (id, state) => ifOpen((s) => s.recordWebhook(id, state), undefined),
    purge: (before) => ifOpen((s) => s.purge(before), []),
    counts: () => ifOpen((s) => s.counts(), { ...EMPTY_COUNTS }),
    // Closing a store that never opened is done at once (and does not try to open it).
    close: () =>
      store
        ? store.then(
            (s) => s.close(),
            () => undefined,
          )
        : Promise.resolve(),
  };
}
