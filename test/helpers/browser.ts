// The dashboard tests' browser: Debian's chromium (/usr/bin/chromium) driven by playwright-core,
// headless. Without that binary a dashboard test fails with how to install it; it does not skip.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { type Browser, chromium, type Page } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";
/** Generous: a busy 2-core machine only makes these waits longer, never fails them. */
export const WAIT = 60_000;

export async function launchChromium(): Promise<Browser> {
  assert.ok(
    existsSync(CHROMIUM),
    `${CHROMIUM} is missing: the dashboard test drives Debian's chromium; install it with \`apt-get install -y chromium\` (.ci/run does)`,
  );
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-background-networking"],
  });
}

/** A fresh page on `url`/ui; page errors collect in `errors`, for the test to assert empty. */
export async function openDashboard(
  browser: Browser,
  url: string,
): Promise<{ page: Page; errors: string[] }> {
  const p = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  p.setDefaultTimeout(WAIT);
  const errors: string[] = [];
  p.on("pageerror", (e) => errors.push(e.message));
  await p.goto(`${url}/ui`);
  return { page: p, errors };
}

/** The highest value a live chart shows (its last 90 points). */
export const chartPeak = async (p: Page, chart: string): Promise<number> =>
  Number(await p.locator(`[data-test=${chart}]`).getAttribute("data-peak"));

/** The number in the first element `selector` matches. */
export const shownNumber = async (p: Page, selector: string): Promise<number> =>
  Number(await p.locator(selector).first().textContent());
