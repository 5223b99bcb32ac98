// Which idle models make room for one more within server.maxLoadedModels / maxLoadedBytes: the
// least recently used first, never one with a call in flight or one still loading.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { evictionsFor, type LoadedModel } from "../../src/catalogue/load-budget.js";

const model = (name: string, lastUsed: number, bytes = 100, inFlight = 0, loading = false) =>
  ({
    name,
    lastUsed,
    loadedBytes: () => bytes,
    inFlight: () => inFlight,
    loadingNow: () => loading,
  }) satisfies LoadedModel & { name: string };

const names = (ms: { name: string }[] | undefined) => ms?.map((m) => m.name);

describe("loaded-models budget", () => {
  it("evicts nothing while the new model fits, and nothing is limited without a budget", () => {
    const loaded = [model("a", 1), model("b", 2)];
    assert.deepEqual(evictionsFor({ maxLoadedModels: 3 }, loaded, 100), []);
    assert.deepEqual(evictionsFor({}, loaded, 1e12), []);
  });

  it("by count: the least recently used idle models first, as many as needed", () => {
    const loaded = [model("new", 30), model("old", 10), model("mid", 20)];
    assert.deepEqual(names(evictionsFor({ maxLoadedModels: 3 }, loaded, 0)), ["old"]);
    assert.deepEqual(names(evictionsFor({ maxLoadedModels: 2 }, loaded, 0)), ["old", "mid"]);
  });

  it("by bytes: until the new model's size fits", () => {
    const loaded = [model("a", 1, 600), model("b", 2, 300), model("c", 3, 100)];
    assert.deepEqual(names(evictionsFor({ maxLoadedBytes: 1000 }, loaded, 0)), []);
    assert.deepEqual(names(evictionsFor({ maxLoadedBytes: 1000 }, loaded, 500)), ["a"]);
    assert.deepEqual(names(evictionsFor({ maxLoadedBytes: 1000 }, loaded, 950)), ["a", "b", "c"]);
    assert.equal(evictionsFor({ maxLoadedBytes: 1000 }, loaded, 1001), undefined);
  });

  it("never a model with a call in flight or still loading; undefined when the rest cannot make room", () => {
    const loaded = [model("busy", 1, 100, 1), model("loading", 2, 100, 0, true), model("idle", 3)];
    assert.deepEqual(names(evictionsFor({ maxLoadedModels: 3 }, loaded, 0)), ["idle"]);
    assert.equal(evictionsFor({ maxLoadedModels: 2 }, loaded, 0), undefined);
  });
});
