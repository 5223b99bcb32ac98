// The budget of loaded models (server.maxLoadedModels, server.maxLoadedBytes): which idle models
// to unload, least recently used first, so one more fits. Pure, apart from measuring a model's
// files before it loads.
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";

export interface Budget {
  maxLoadedModels?: number | undefined;
  maxLoadedBytes?: number | undefined;
}

/** A loaded (or loading) model as the budget sees it. */
export interface LoadedModel {
  /** performance.now() of its last call. */
  readonly lastUsed: number;
  loadedBytes(): number;
  inFlight(): number;
  loadingNow(): boolean;
}

/**
 * The models to unload so that a model of `needBytes` fits beside `loaded`: none when it fits
 * already, the least recently used idle ones (no call in flight, not loading) otherwise;
 * undefined when even unloading every idle one would not make room.
 */
export function evictionsFor<M extends LoadedModel>(
  budget: Budget,
  loaded: readonly M[],
  needBytes: number,
): M[] | undefined {
  let models = loaded.length;
  let bytes = loaded.reduce((sum, m) => sum + m.loadedBytes(), 0);
  const over = () =>
    (budget.maxLoadedModels !== undefined && models + 1 > budget.maxLoadedModels) ||
    (budget.maxLoadedBytes !== undefined && bytes + needBytes > budget.maxLoadedBytes);
  const victims: M[] = [];
  const idle = loaded
    .filter((m) => m.inFlight() === 0 && !m.loadingNow())
    .sort((a, b) => a.lastUsed - b.lastUsed);
  for (const m of idle) {
    if (!over()) break;
    victims.push(m);
    models--;
    bytes -= m.loadedBytes();
  }
  return over() ? undefined : victims;
}

/** A model's size on disk (a file, or a folder's files): the budget's estimate before it loads. */
export function pathBytes(path: string): number {
  try {
    const s = statSync(path);
    if (!s.isDirectory()) return s.size;
    let bytes = 0;
    for (const e of readdirSync(path, { recursive: true }) as string[]) {
      const f = statSync(join(path, e));
      if (f.isFile()) bytes += f.size;
    }
    return bytes;
  } catch {
    return 0;
  }
}
