// @vitest-environment node
// The stylesheet's every text colour against its background, in the light
// scheme and the dark one, held to WCAG's 4.5:1 for text.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

const css = readFileSync(new URL('../../src/styles.css', import.meta.url), 'utf8')

/** The variables a block sets: the first `.msd {` is light, the one under prefers-color-scheme: dark is dark. */
function variables(block: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const m of block.matchAll(/(--msd-[a-z-]+):\s*(#[0-9a-fA-F]{6})\s*;/g)) out[m[1]] = m[2]
  return out
}
const lightBlock = css.slice(css.indexOf('.msd {'), css.indexOf('}', css.indexOf('.msd {')))
const darkStart = css.indexOf('@media (prefers-color-scheme: dark)')
const darkBlock = css.slice(darkStart, css.indexOf('}', darkStart))
const light = variables(lightBlock)
const dark = { ...light, ...variables(darkBlock) }

/** Every (text, background) pair the stylesheet uses: a rule's colour, over its own background, the one its `on:` comment names, or the page's. */
function pairs(): { rule: string; fg: string; bg: string }[] {
  const out: { rule: string; fg: string; bg: string }[] = []
  for (const m of css.matchAll(/([^{}]+)\{([^{}]*)\}/g)) {
    const rule = m[1].trim()
    const body = m[2]
    const color = /(?:^|[\s;])color:\s*var\((--msd-[a-z-]+)\)/.exec(body)
    const literal = /(?:^|[\s;])color:\s*(#|rgb|hsl)/.exec(body)
    if (literal) throw new Error(`${rule}: a colour not from a variable`)
    if (!color) continue
    const own = /background:\s*var\((--msd-[a-z-]+)\)/.exec(body)
    const on = /on:\s*(--msd-[a-z-]+)/.exec(body)
    out.push({ rule, fg: color[1], bg: own?.[1] ?? on?.[1] ?? '--msd-bg' })
  }
  return out
}

function luminance(hex: string): number {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16) / 255)
  const lin = (c: number) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4)
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)
}

export function contrast(a: string, b: string): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x)
  return (hi + 0.05) / (lo + 0.05)
}

describe('the stylesheet', () => {
  it('computes contrast as WCAG does (black on white is 21:1)', () => {
    expect(contrast('#000000', '#ffffff')).toBeCloseTo(21, 5)
    expect(contrast('#777777', '#ffffff')).toBeLessThan(4.5)
  })

  it('uses text colours, each over a background it names', () => {
    expect(pairs().length).toBeGreaterThan(10)
  })

  for (const [scheme, vars] of [
    ['light', light],
    ['dark', dark],
  ] as const) {
    it(`keeps every text at 4.5:1 or more against its background in the ${scheme} scheme`, () => {
      const low = pairs()
        .map((p) => {
          const fg = vars[p.fg]
          const bg = vars[p.bg]
          if (!fg || !bg) throw new Error(`${p.rule}: ${p.fg} or ${p.bg} has no ${scheme} value`)
          return { ...p, ratio: contrast(fg, bg) }
        })
        .filter((p) => p.ratio < 4.5)
      expect(low).toEqual([])
    })
  }
})
