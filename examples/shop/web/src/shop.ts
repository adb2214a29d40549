// Plain data and sentences of the shop's pages, apart from Vue, and the
// requests both pages make to the program that served them.

export interface Product {
  id: string
  name: string
  price_cents: number
}

export interface Register {
  id: string
  name: string
}

/** A line of a receipt: a product, how many, at what price each. */
export interface ReceiptLine {
  /** The product's name; null at the head office once it was deleted. */
  product: string | null
  quantity: number
  price_cents: number
  /** On a register: the product was deleted at the head office, and is
   * kept here only for its receipts. */
  retired?: boolean
}

export interface Receipt {
  id: string
  register_id?: string
  register?: string
  total_cents: number
  sold_at: string
  /** Its lines, as both programs answer (left out where only the receipt
   * counts, as in counting the receipts filed). */
  lines?: ReceiptLine[]
}

/** What a register's page shows of it. */
export interface RegisterState {
  id: string
  name: string
  online: boolean
  /** Its network is up (not broken from its page). */
  network: boolean
  connection: string
  products: Product[]
  receipts: Receipt[]
  not_at_head_office: number
  /** The footer it prints under every receipt, and its version. */
  footer: { text: string; changed_at: string } | null
  /** Its printer is on. */
  printer: boolean
  /** The head office's wish of its footer, if it holds one. */
  wish: HeldWish | null
}

/** 250 → "2.50". */
export function money(cents: number): string {
  const sign = cents < 0 ? '-' : ''
  const c = Math.abs(cents)
  return `${sign}${Math.floor(c / 100)}.${String(c % 100).padStart(2, '0')}`
}

/** "2.50", "2,5" or "3" → cents; null when it is not a price. */
export function cents(text: string): number | null {
  const m = /^\s*(\d+)(?:[.,](\d{1,2}))?\s*$/.exec(text)
  if (!m) return null
  return Number(m[1]) * 100 + Number((m[2] ?? '0').padEnd(2, '0'))
}

/** "Coffee 3.00", or "2 × Tea 5.00": a line as a receipt prints it. */
export function lineSentence(line: ReceiptLine): string {
  const name = line.product ?? 'a product since deleted'
  const amount = money(line.quantity * line.price_cents)
  return line.quantity === 1 ? `${name} ${amount}` : `${line.quantity} × ${name} ${amount}`
}

/** A sale being made: each product once, with how many. */
export interface SaleLine {
  product: Product
  quantity: number
}

/** `quantity` more of `product` on the sale being made. */
export function withMore(lines: SaleLine[], product: Product, quantity: number): SaleLine[] {
  const found = lines.find((l) => l.product.id === product.id)
  if (found) return lines.map((l) => (l === found ? { ...l, quantity: l.quantity + quantity } : l))
  return [...lines, { product, quantity }]
}

/** What the sale being made comes to. */
export function saleTotal(lines: SaleLine[]): number {
  return lines.reduce((sum, l) => sum + l.quantity * l.product.price_cents, 0)
}

/** "2 receipts not at the head office yet", or that all are. */
export function notAtHeadOfficeSentence(n: number): string {
  if (n === 0) return 'Every receipt is at the head office.'
  return `${n} ${n === 1 ? 'receipt' : 'receipts'} not at the head office yet`
}

/** The receipts filed, counted per register. */
export function receiptsPerRegister(receipts: Receipt[]): Map<string, number> {
  const counts = new Map<string, number>()
  for (const r of receipts) counts.set(r.register ?? '', (counts.get(r.register ?? '') ?? 0) + 1)
  return counts
}

/** "1 receipt filed", "2 receipts filed". */
export function receiptsFiledSentence(n: number): string {
  return `${n} ${n === 1 ? 'receipt' : 'receipts'} filed`
}

/** Each register's id with its name, as the dashboard's `names` prop. */
export function namesOf(registers: Register[]): Record<string, string> {
  return Object.fromEntries(registers.map((r) => [r.id, r.name]))
}

async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(`api/${path}`, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await response.text()
  if (!response.ok) {
    let why = text
    try {
      why = (JSON.parse(text) as { error?: string }).error ?? text
    } catch {
      // not JSON: the text as it is
    }
    throw new Error(why)
  }
  return JSON.parse(text) as T
}

export const get = <T>(path: string) => request<T>('GET', path)
export const post = <T>(path: string, body?: unknown) => request<T>('POST', path, body ?? {})
export const patch = <T>(path: string, body: unknown) => request<T>('PATCH', path, body)
export const remove = <T>(path: string) => request<T>('DELETE', path)

/** A register's footer as the head office holds it: as the register last
 * reported it (null before its first report is filed), with the version a
 * wish is based on. */
export interface ReportedFooter {
  register_id: string
  register: string
  text: string | null
  changed_at: string | null
}

/** A wish of a footer, as sync.wishes lists it (the part the page reads). */
export interface FooterWish {
  id: string
  table: string
  key: string
  wanted: { text?: string }
  state: 'pending' | 'waiting' | 'applied' | 'refused' | 'superseded'
  reason?: string | null
}

/** The wish of this register's footer among those sync.wishes listed. */
export function wishOf(footer: ReportedFooter, wishes: FooterWish[]): FooterWish | null {
  const key = footer.register_id.toLowerCase()
  return wishes.find((w) => w.table === 'footers' && w.key.toLowerCase() === key) ?? null
}

/** Where a register's footer stands, as its row on the head office's page
 * says it: its tone (green, amber, red), a sentence, and whether the
 * reported footer is struck through beside the wished one (a wish on its
 * way or waiting). */
export interface FooterStanding {
  state: 'in_sync' | 'pending' | 'waiting' | 'applied' | 'refused' | 'superseded'
  tone: 'ok' | 'busy' | 'fix'
  sentence: string
  struck: boolean
  /** The wish can be let go of (dismiss): one not applied. */
  dismissable: boolean
}

export function footerStanding(wish: FooterWish | null): FooterStanding {
  const why = wish?.reason ? `: ${wish.reason}` : ''
  switch (wish?.state) {
    case undefined:
      return { state: 'in_sync', tone: 'ok', sentence: 'In sync', struck: false, dismissable: false }
    case 'applied':
      return { state: 'applied', tone: 'ok', sentence: 'In sync: the wish was applied', struck: false, dismissable: false }
    case 'pending':
      return { state: 'pending', tone: 'busy', sentence: 'On its way', struck: true, dismissable: true }
    case 'waiting':
      return { state: 'waiting', tone: 'busy', sentence: `Waiting${why}`, struck: true, dismissable: true }
    case 'refused':
      return {
        state: 'refused',
        tone: 'fix',
        sentence: `Refused${why}; the register's footer stands`,
        struck: false,
        dismissable: true,
      }
    case 'superseded':
      return {
        state: 'superseded',
        tone: 'busy',
        sentence: "Superseded: changed on the register first; the register's own stands",
        struck: false,
        dismissable: true,
      }
  }
}

/** A register's page: the head office's wish of its footer as the
 * register holds it, and its answer (null until it answers this wish). */
export interface HeldWish {
  text: string | null
  outcome: 'applied' | 'waiting' | 'refused' | 'superseded' | null
  reason: string | null
}

/** What a register's page says of the head office's wish. */
export function heldWishSentence(wish: HeldWish): string {
  const wished = `The head office wished “${wish.text ?? ''}”`
  const why = wish.reason ? `: ${wish.reason}` : ''
  switch (wish.outcome) {
    case null:
      return `${wished}: about to print it.`
    case 'applied':
      return `${wished}: printed.`
    case 'waiting':
      return `${wished}: waiting${why}.`
    case 'refused':
      return `${wished}: refused${why}.`
    case 'superseded':
      return `${wished}: superseded, the footer was changed here first.`
  }
}
