// Opening a SQLite file (better-sqlite3), the one place that says which native build is used.
// better-sqlite3 is the only native module tied to one Node.js ABI: MODELPORT_SQLITE_BINDING may
// name a better_sqlite3.node built for another Node (test/node24.sh runs this checkout's tests
// on Node 24 that way while node_modules holds the build for the machine's Node).
import Database from "better-sqlite3";

export function openSqlite(
  path: string,
  options: { timeout: number; readonly?: boolean },
): Database.Database {
  const binding = process.env.MODELPORT_SQLITE_BINDING;
  return new Database(path, { ...options, ...(binding ? { nativeBinding: binding } : {}) });
}
