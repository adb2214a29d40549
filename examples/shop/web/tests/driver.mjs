#!/usr/bin/env node
// Drives Debian's Chromium (never a browser a tool downloads) over the
// DevTools protocol for examples/shop/tests/in_a_browser.rs: one JSON
// command a line on stdin, one JSON answer a line on stdout. Each page is
// a tab of its own, by name.
//
//   {"open": NAME, "url": URL}
//   {"page": NAME, "fill": CSS, "value": TEXT, "press": KEY?}
//   {"page": NAME, "click": CSS}
//   {"page": NAME, "select": CSS, "label": TEXT}   picks the option shown as TEXT
//   {"page": NAME, "wait": CSS, "text": TEXT?, "count": N?}
//        until the elements CSS picks are N (any, when N is not given),
//        one of them showing TEXT when given; answers what each shows;
//        "patience": MS waits that long at most (20 s unless told)
//   {"page": NAME, "read": CSS}   what each element CSS picks shows
//   {"page": NAME, "screenshot": FILE}
//   {"screenshots": [[NAME, FILE], ...]}   several pages, one after another
//   {"close": NAME}   closes that tab
//   {"quit": true}
//
// An answer is {"texts": [...]}, or {"error": why, "texts": [...]} with
// what the page showed last.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { chromium } from 'playwright-core'

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium'
// Without the background-networking flags Chromium keeps trying hosts
// outside this machine.
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  // Every page is a tab of its own, each refreshing as a person's would:
  // none is slowed down for being in the background.
  '--disable-background-timer-throttling',
  '--disable-renderer-backgrounding',
  '--disable-backgrounding-occluded-windows',
]
const PATIENCE = 20000

function texts(page, css) {
  return page.evaluate(
    (css) => [...document.querySelectorAll(css)].map((e) => e.innerText.replace(/\s+/g, ' ').trim()),
    css,
  )
}

async function wait(page, { wait: css, text, count, patience }) {
  const until = Date.now() + (patience ?? PATIENCE)
  for (;;) {
    const seen = await texts(page, css)
    const counted = count === undefined ? seen.length > 0 : seen.length === count
    if (counted && (text === undefined || seen.some((t) => t.includes(text)))) return { texts: seen }
    if (Date.now() > until) {
      const want = `${count ?? 'some'} of ${css}${text === undefined ? '' : ` showing "${text}"`}`
      return { error: `the page never showed ${want}`, texts: seen }
    }
    await page.waitForTimeout(100)
  }
}

// A tab in the background is drawn only when Chromium gets round to it
// (a second or more here): brought to the front, it is drawn at once.
async function screenshot(page, file) {
  mkdirSync(dirname(file), { recursive: true })
  await page.bringToFront()
  await page.screenshot({ path: file, fullPage: true })
}

async function main() {
  const profile = mkdtempSync(join(tmpdir(), 'shop-chromium-'))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: 1100, height: 1200 },
  })
  const pages = new Map()
  const answer = (value) => process.stdout.write(`${JSON.stringify(value)}\n`)
  for await (const line of createInterface({ input: process.stdin })) {
    try {
      const c = JSON.parse(line)
      if (c.quit) break
      if (c.screenshots) {
        for (const [name, file] of c.screenshots) {
          const page = pages.get(name)
          if (!page) throw new Error(`no page ${name}`)
          await screenshot(page, file)
        }
        answer({ texts: [] })
        continue
      }
      if (c.close) {
        await pages.get(c.close)?.close()
        pages.delete(c.close)
        answer({ texts: [] })
        continue
      }
      if (c.open) {
        const page = pages.size === 0 && context.pages()[0] ? context.pages()[0] : await context.newPage()
        pages.set(c.open, page)
        await page.goto(c.url)
        answer({ texts: [] })
        continue
      }
      const page = pages.get(c.page)
      if (!page) throw new Error(`no page ${c.page}`)
      if (c.fill) {
        await page.fill(c.fill, c.value)
        if (c.press) await page.press(c.fill, c.press)
        answer({ texts: [] })
      } else if (c.select) {
        await page.selectOption(c.select, { label: c.label }, { timeout: PATIENCE })
        answer({ texts: [] })
      } else if (c.click) {
        // Playwright's own click waits a couple of seconds on these pages
        // (which draw again twice a second) before clicking: the element's
        // own click() is what a person's click does, at once.
        await page.waitForSelector(c.click, { timeout: PATIENCE })
        await page.$eval(c.click, (e) => e.click())
        answer({ texts: [] })
      } else if (c.wait) {
        answer(await wait(page, c))
      } else if (c.read) {
        answer({ texts: await texts(page, c.read) })
      } else if (c.screenshot) {
        await screenshot(page, c.screenshot)
        answer({ texts: [] })
      } else {
        throw new Error(`what is ${line}?`)
      }
    } catch (e) {
      answer({ error: String(e?.stack ?? e) })
    }
  }
  // Chromium may linger on closing: the test waits for no answer to quit.
  setTimeout(() => process.exit(0), 3000).unref()
  await context.close()
  rmSync(profile, { recursive: true, force: true })
  process.exit(0)
}

await main()
