// Where a register's footer stands, as both pages say it.
import { describe, expect, it } from 'vitest'
import { footerStanding, heldWishSentence, wishOf, type FooterWish } from './shop'

const footer = { register_id: 'AB-1', register: 'Register 1', text: 'Thanks', changed_at: 'v1' }
const wish = (state: FooterWish['state'], reason: string | null = null): FooterWish => ({
  id: 'w',
  table: 'footers',
  key: 'ab-1',
  wanted: { text: 'Hello' },
  state,
  reason,
})

describe("a register's footer at the head office", () => {
  it('finds the wish of its register whatever the spelling of the key', () => {
    expect(wishOf(footer, [{ ...wish('pending'), table: 'screens' }, wish('pending')])?.table).toBe('footers')
    expect(wishOf(footer, [])).toBeNull()
  })

  it('is green with no wish, and green once the wish is applied', () => {
    expect(footerStanding(null)).toMatchObject({ tone: 'ok', sentence: 'In sync', struck: false })
    expect(footerStanding(wish('applied'))).toMatchObject({ tone: 'ok', dismissable: false })
  })

  it('strikes the reported footer through while the wish is on its way or waits, saying why', () => {
    expect(footerStanding(wish('pending'))).toMatchObject({ tone: 'busy', sentence: 'On its way', struck: true })
    expect(footerStanding(wish('waiting', 'the printer is off'))).toMatchObject({
      tone: 'busy',
      sentence: 'Waiting: the printer is off',
      struck: true,
    })
  })

  it("is red when refused, saying why, and the register's footer stands", () => {
    const refused = footerStanding(wish('refused', 'longer than the printer\'s 40 characters'))
    expect(refused.tone).toBe('fix')
    expect(refused.sentence).toBe("Refused: longer than the printer's 40 characters; the register's footer stands")
    expect(refused.struck).toBe(false)
    expect(refused.dismissable).toBe(true)
  })

  it('says a wish based on a footer changed on the register first is superseded', () => {
    expect(footerStanding(wish('superseded')).sentence).toBe(
      "Superseded: changed on the register first; the register's own stands",
    )
  })
})

describe("the head office's wish on a register's page", () => {
  it('says what became of it', () => {
    expect(heldWishSentence({ text: 'Hello', outcome: 'waiting', reason: 'the printer is off' })).toBe(
      'The head office wished “Hello”: waiting: the printer is off.',
    )
    expect(heldWishSentence({ text: 'Hello', outcome: 'applied', reason: '' })).toBe(
      'The head office wished “Hello”: printed.',
    )
  })
})
