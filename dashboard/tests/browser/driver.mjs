#!/usr/bin/env node
// Drives Debian's Chromium (never a browser a tool downloads) over the
// DevTools protocol for dashboard/server/tests/in_a_browser.rs: one JSON
// command a line on stdin, one JSON answer a line on stdout.
//
//   {"open": URL}
//   {"wait": {"tone": "fix", "states": {"<replica id>": "awaiting_fix"}, "failed": true}, "screenshot": FILE}
//   {"pick": "<replica id>"}      by keyboard: Tab to its button, then Enter
//   {"quit": true}
//
// Each answer is what the page shows: the banner, the replicas, the
// problems, the wishes, the progress, a failed read; or {"error": why}.
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { chromium } from 'playwright-core'

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium'
// Without the background-networking flags Chromium keeps trying hosts
// outside this machine.
export const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

/** Debian's Chromium, headless, with FLAGS and any `more` flags after them. */
export async function launch(more = []) {
  const profile = mkdtempSync(join(tmpdir(), 'msd-chromium-'))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [...FLAGS, ...more],
    viewport: { width: 1100, height: 1400 },
  })
  const page = context.pages()[0] ?? (await context.newPage())
  const close = async () => {
    await context.close()
    rmSync(profile, { recursive: true, force: true })
  }
  return { context, page, close }
}

/** What the page shows, read from the DOM as a person would read it. */
export function shown(page) {
  return page.evaluate(() => {
    const text = (el) => (el ? el.innerText.replace(/\s+/g, ' ').trim() : null)
    const all = (sel) => [...document.querySelectorAll(sel)]
    return {
      banner: { tone: document.querySelector('.msd-banner')?.dataset.tone ?? null, text: text(document.querySelector('.msd-banner')) },
      replicas: all('.msd-dashboard .msd-replica').map((r) => ({ id: r.dataset.replica, state: r.dataset.state, text: text(r) })),
      problems: all('.msd-problem').map((p) => ({ kind: p.dataset.kind, remedy: p.dataset.remedy, text: text(p) })),
      wishes: all('.msd-wish').map((w) => ({ state: w.dataset.state, replica: w.dataset.replica, text: text(w) })),
      progress: all('.msd-progress tbody tr').map((r) => ({ table: r.dataset.table, text: text(r) })),
      failed: text(document.querySelector('.msd-failed')),
      refused: text(document.querySelector('.msd-refused')),
    }
  })
}

async function waitFor(page, want, timeout = 20000) {
  const until = Date.now() + timeout
  let last
  for (;;) {
    last = await shown(page)
    const states = Object.fromEntries(last.replicas.map((r) => [r.id, r.state]))
    const ok =
      (!want.tone || last.banner.tone === want.tone) &&
      Object.entries(want.states ?? {}).every(([id, s]) => states[id] === s) &&
      (want.failed === undefined || Boolean(last.failed) === want.failed)
    if (ok) return last
    if (Date.now() > until) return { ...last, error: `the page never showed ${JSON.stringify(want)}` }
    await page.waitForTimeout(200)
  }
}

async function pick(page, id) {
  // Tab through the page until the replica's button has the focus.
  for (let i = 0; i < 80; i++) {
    await page.keyboard.press('Tab')
    const at = await page.evaluate(() => document.activeElement?.closest('.msd-replica')?.dataset.replica ?? null)
    const isPick = await page.evaluate(() => document.activeElement?.classList.contains('msd-replica-pick') ?? false)
    if (at === id && isPick) {
      await page.keyboard.press('Enter')
      await page.waitForSelector(`.msd-progress[data-replica="${id}"]`, { timeout: 20000 })
      return { ...(await shown(page)), tabs: i + 1 }
    }
  }
  return { error: `Tab never reached ${id}` }
}

async function main() {
  const { page, close } = await launch()
  const lines = createInterface({ input: process.stdin })
  const answer = (value) => process.stdout.write(`${JSON.stringify(value)}\n`)
  for await (const line of lines) {
    let command
    try {
      command = JSON.parse(line)
      if (command.open) {
        await page.goto(command.open)
        answer({ opened: command.open })
      } else if (command.wait) {
        const seen = await waitFor(page, command.wait)
        if (command.screenshot) {
          mkdirSync(dirname(command.screenshot), { recursive: true })
          await page.screenshot({ path: command.screenshot, fullPage: true })
        }
        answer(seen)
      } else if (command.pick) {
        answer(await pick(page, command.pick))
      } else if (command.quit) {
        break
      }
    } catch (e) {
      answer({ error: String(e?.stack ?? e) })
    }
  }
  // Chromium may linger on closing: the test waits for no answer to quit.
  setTimeout(() => process.exit(0), 3000).unref()
  await close()
  process.exit(0)
}

if (process.argv[1] && import.meta.url === `file://${process.argv[1]}`) await main()
