// A model repository on disk (docs/Models-over-time.md): DIR/NAME/VERSION/ holds one version's model
// file or folder with its golden file and manifest, and DIR/NAME/model.yaml the model's own
// settings and version policy. Scanning only reads the folders and resolves each version into the
// config its model is built from; what gets loaded, swapped or unloaded is the catalogue's.
import { existsSync, readdirSync, type Stats, statSync } from "node:fs";
import { basename, extname, join } from "node:path";
import { backendForPath, isTransformersFolder } from "../config/backends.js";
import { type EntryContext, readYaml, resolveEntry } from "../config/load.js";
import { modelSchema, repositoryModelSchema, type VersionPolicy } from "../config/schema.js";
import type { ServedModelConfig } from "./served-model.js";

/** A version folder's name: a positive integer without leading zeros, as Triton's. */
const VERSION_DIR = /^[1-9][0-9]{0,17}$/;
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/** The model's settings file in DIR/NAME/. */
export const MODEL_SETTINGS_FILE = "model.yaml";
/** Files a version folder may hold before scanning it is refused (a fingerprint reads each one's stat). */
const MAX_FILES = 10_000;

export interface RepositoryVersion {
  readonly version: string;
  /** What the version's model is built from; absent when `problems` says why it cannot be. */
  readonly config?: ServedModelConfig;
  readonly problems: readonly string[];
  /** Changes whenever a file of the version or the model's settings changes (names, sizes, times). */
  readonly fingerprint: string;
}

export interface RepositoryModel {
  readonly name: string;
  readonly policy: VersionPolicy;
  /** Every version folder, lowest first. */
  readonly versions: readonly RepositoryVersion[];
  /** Problems with model.yaml: none of the versions can be built while it has any. */
  readonly problems: readonly string[];
}

export interface RepositoryScan {
  readonly models: readonly RepositoryModel[];
  /** Entries of DIR that are not model folders, in words. */
  readonly problems: readonly string[];
}

/** Numeric order of version folder names (no leading zeros: longer is larger). */
export function compareVersions(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** The versions `policy` keeps, lowest first. */
export function wantedVersions(policy: VersionPolicy, versions: readonly string[]): string[] {
  const sorted = [...versions].sort(compareVersions);
  if (policy === "all") return sorted;
  if ("latest" in policy) return sorted.slice(-policy.latest);
  return sorted.filter((v) => policy.specific.includes(v));
}

type ScanContext = Omit<EntryContext, "baseDir">;

export function scanRepository(dir: string, ctx: ScanContext): RepositoryScan {
  const problems: string[] = [];
  const models: RepositoryModel[] = [];
  for (const entry of listDir(dir, problems)) {
    if (entry.startsWith(".")) continue;
    const path = join(dir, entry);
    if (!isDir(path)) continue;
    if (!MODEL_NAME.test(entry)) {
      problems.push(`${path}: not a model name (letters, digits, '.', '_' or '-'); skipped`);
      continue;
    }
    models.push(scanModel(dir, entry, ctx));
  }
  return { models, problems };
}

/** One model's folder; a model whose folder is gone has no versions. */
export function scanModel(dir: string, name: string, ctx: ScanContext): RepositoryModel {
  const modelDir = join(dir, name);
  const problems: string[] = [];
  const settingsFile = join(modelDir, MODEL_SETTINGS_FILE);
  let settings: Record<string, unknown> = {};
  let policy: VersionPolicy = { latest: 1 };
  let settingsStamp = "";
  if (existsSync(settingsFile)) {
    settingsStamp = stamp(settingsFile);
    const raw = readYaml(settingsFile, problems);
    const parsed = raw === undefined ? undefined : repositoryModelSchema.safeParse(raw);
    if (parsed && !parsed.success) {
      for (const issue of parsed.error.issues)
        problems.push(`${settingsFile}: ${issue.path.join(".") || "(top level)"}: ${issue.message}`);
    } else if (parsed?.success) {
      policy = parsed.data.versionPolicy;
      // The raw keys, so the version's entry gets the defaults of a `models` entry, not of a partial one.
      const { versionPolicy: _, ...rest } = raw as Record<string, unknown>;
      settings = rest;
    }
  }
  const versions: RepositoryVersion[] = [];
  const names = isDir(modelDir) ? listDir(modelDir, problems) : [];
  for (const v of names
    .filter((n) => VERSION_DIR.test(n) && isDir(join(modelDir, n)))
    .sort(compareVersions)) {
    versions.push(scanVersion(modelDir, name, v, settings, settingsStamp, problems, ctx));
  }
  return { name, policy, versions, problems };
}

function scanVersion(
  modelDir: string,
  name: string,
  version: string,
  settings: Record<string, unknown>,
  settingsStamp: string,
  modelProblems: readonly string[],
  ctx: ScanContext,
): RepositoryVersion {
  const dir = join(modelDir, version);
  const problems: string[] = [];
  const fingerprint = `${settingsStamp}|${fingerprintOf(dir, problems)}`;
  if (modelProblems.length) return { version, problems: [...modelProblems], fingerprint };
  const found = modelFile(dir, problems);
  if (!found) return { version, problems, fingerprint };
  const entry: Record<string, unknown> = { ...settings, name, version, path: found.path };
  entry.backend ??= backendForPath(found.path) ?? "onnx";
  // A folder model (transformers) keeps its golden file and manifest inside the folder.
  if (found.folder && entry.golden === undefined && existsSync(join(dir, "golden.json")))
    entry.golden = join(dir, "golden.json");
  const parsed = modelSchema.safeParse(entry);
  if (!parsed.success) {
    for (const issue of parsed.error.issues)
      problems.push(`${dir}: ${issue.path.join(".")}: ${issue.message}`);
    return { version, problems, fingerprint };
  }
  const config = resolveEntry(parsed.data, dir, { ...ctx, baseDir: modelDir }, problems);
  return problems.length ? { version, problems, fingerprint } : { version, config, problems, fingerprint };
}

/**
 * The version's model: the folder itself when it is a transformers folder (config.json and
 * tokenizer.json), else its one model file (.onnx, .gguf, a handler module); `model.*` wins
 * when there are several.
 */
function modelFile(dir: string, problems: string[]): { path: string; folder: boolean } | undefined {
  if (isTransformersFolder(dir)) return { path: dir, folder: true };
  const candidates = listDir(dir, problems)
    .filter((f) => !f.startsWith(".") && backendForPath(join(dir, f)) !== undefined && isFile(join(dir, f)))
    .sort();
  const named = candidates.filter((f) => basename(f, extname(f)) === "model");
  const pick = named.length === 1 ? named : candidates;
  if (pick.length === 1) return { path: join(dir, pick[0]!), folder: false };
  problems.push(
    pick.length === 0
      ? `${dir}: no model file (.onnx, .gguf, a .ts/.js handler, or a folder with config.json and tokenizer.json)`
      : `${dir}: several model files (${pick.join(", ")}); name the one to serve model.<ext>`,
  );
  return undefined;
}

/** Names, sizes and modification times of every file under `dir`, as one string. */
function fingerprintOf(dir: string, problems: string[]): string {
  let entries: string[];
  try {
    entries = readdirSync(dir, { recursive: true }) as string[];
  } catch (err) {
    problems.push(`${dir}: cannot list: ${(err as Error).message}`);
    return "unreadable";
  }
  if (entries.length > MAX_FILES) {
    problems.push(`${dir}: holds more than ${MAX_FILES} files`);
    return `many:${entries.length}`;
  }
  return entries
    .sort()
    .map((e) => `${e}:${stamp(join(dir, e))}`)
    .join(";");
}

function stamp(path: string): string {
  let s: Stats;
  try {
    s = statSync(path);
  } catch {
    return "gone";
  }
  return s.isDirectory() ? "d" : `${s.size}@${s.mtimeMs}`;
}

function listDir(dir: string, problems: string[]): string[] {
  try {
    return readdirSync(dir);
  } catch (err) {
    problems.push(`${dir}: cannot list: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    return [];
  }
}

function isDir(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
