// A receipt's lines and the sale being made, as the pages say them.
import { describe, expect, it } from 'vitest'
import { lineSentence, receiptsFiledSentence, saleTotal, withMore } from './shop'

const tea = { id: 't', name: 'Tea', price_cents: 250 }
const cake = { id: 'c', name: 'Cake', price_cents: 450 }

describe('a receipt line', () => {
  it('says the product and its price when one was sold', () => {
    expect(lineSentence({ product: 'Coffee', quantity: 1, price_cents: 300 })).toBe('Coffee 3.00')
  })

  it('says how many and what they came to when more were sold', () => {
    expect(lineSentence({ product: 'Tea', quantity: 2, price_cents: 250 })).toBe('2 × Tea 5.00')
  })

  it('says a product the head office deleted since is gone', () => {
    expect(lineSentence({ product: null, quantity: 1, price_cents: 250 })).toBe('a product since deleted 2.50')
  })
})

describe('the sale being made', () => {
  it('adds a product once, counting how many', () => {
    const lines = withMore(withMore(withMore([], tea, 1), cake, 1), tea, 2)
    expect(lines.map((l) => [l.product.name, l.quantity])).toEqual([
      ['Tea', 3],
      ['Cake', 1],
    ])
  })

  it('comes to the sum of its lines', () => {
    expect(saleTotal(withMore(withMore([], tea, 2), cake, 1))).toBe(950)
  })
})

describe('the receipts filed of a register', () => {
  it('are counted in words', () => {
    expect(receiptsFiledSentence(1)).toBe('1 receipt filed')
    expect(receiptsFiledSentence(2)).toBe('2 receipts filed')
    expect(receiptsFiledSentence(0)).toBe('0 receipts filed')
  })
})
