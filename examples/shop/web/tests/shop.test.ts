// The shop's sentences and plain data, apart from Vue.
import { describe, expect, it } from 'vitest'
import { cents, money, namesOf, notAtHeadOfficeSentence, receiptsPerRegister } from '../src/shop'

describe('prices', () => {
  it('shows cents as units and two decimals', () => {
    expect(money(250)).toBe('2.50')
    expect(money(5)).toBe('0.05')
    expect(money(1200)).toBe('12.00')
  })

  it('reads a price typed with a point, a comma or no decimals', () => {
    expect(cents('2.75')).toBe(275)
    expect(cents('2,5')).toBe(250)
    expect(cents(' 3 ')).toBe(300)
  })

  it('refuses what is not a price', () => {
    expect(cents('')).toBeNull()
    expect(cents('tea')).toBeNull()
    expect(cents('-1')).toBeNull()
    expect(cents('1.234')).toBeNull()
  })
})

describe('a register', () => {
  it('says how many receipts are not at the head office yet', () => {
    expect(notAtHeadOfficeSentence(2)).toBe('2 receipts not at the head office yet')
    expect(notAtHeadOfficeSentence(1)).toBe('1 receipt not at the head office yet')
  })

  it('says when every receipt is at the head office', () => {
    expect(notAtHeadOfficeSentence(0)).toBe('Every receipt is at the head office.')
  })
})

describe('the head office', () => {
  it('counts the receipts filed per register', () => {
    const tea = { product: 'Tea', quantity: 1, price_cents: 250 }
    const receipts = [
      { id: 'a', register: 'Register 1', total_cents: 250, sold_at: '', lines: [tea] },
      { id: 'b', register: 'Register 2', total_cents: 250, sold_at: '', lines: [tea] },
      {
        id: 'c',
        register: 'Register 2',
        total_cents: 900,
        sold_at: '',
        lines: [{ product: 'Cake', quantity: 2, price_cents: 450 }],
      },
    ]
    expect(Object.fromEntries(receiptsPerRegister(receipts))).toEqual({ 'Register 1': 1, 'Register 2': 2 })
  })

  it('names each register for the dashboard by its id', () => {
    expect(namesOf([{ id: 'r1', name: 'Register 1' }])).toEqual({ r1: 'Register 1' })
  })
})
