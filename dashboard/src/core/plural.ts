// Counts in sentences take the locale's plural forms (CLDR's, as the
// browser knows them): English has one and other, Spanish one, many
// (a million and up) and other.

/** A count's forms: `other` always, the others where the language has them. */
export type Forms = Partial<Record<Intl.LDMLPluralRule, string>> & { other: string }

const rules = new Map<string, Intl.PluralRules>()

/** The form of `forms` for the count `n` in `locale`, `{n}` written in. */
export function plural(locale: string, n: number, forms: Forms): string {
  let r = rules.get(locale)
  if (!r) {
    r = new Intl.PluralRules(locale)
    rules.set(locale, r)
  }
  const form = forms[r.select(n)] ?? forms.other
  return form.replaceAll('{n}', new Intl.NumberFormat(locale).format(n))
}

/** How long ago, in the locale's words ("5 minutes ago", "hace 5 minutos"). */
export function ago(locale: string, ms: number): string {
  const rtf = new Intl.RelativeTimeFormat(locale, { numeric: 'auto' })
  const s = Math.round(ms / 1000)
  if (s < 60) return rtf.format(-s, 'second')
  const m = Math.round(s / 60)
  if (m < 60) return rtf.format(-m, 'minute')
  const h = Math.round(m / 60)
  if (h < 48) return rtf.format(-h, 'hour')
  return rtf.format(-Math.round(h / 24), 'day')
}

/** A span of time in the locale's words ("5 minutes", "5 minutos"). */
export function span(locale: string, ms: number): string {
  const s = Math.round(ms / 1000)
  const [n, unit] =
    s < 60 ? [s, 'second'] : s < 3600 ? [Math.round(s / 60), 'minute'] : s < 172800 ? [Math.round(s / 3600), 'hour'] : [Math.round(s / 86400), 'day']
  return new Intl.NumberFormat(locale, { style: 'unit', unit, unitDisplay: 'long' }).format(n)
}
