import { computed, getCurrentInstance, type ComputedRef, type MaybeRefOrGetter, toValue } from 'vue'
import { type Words, wordsFor } from '../core/words'

/**
 * The words of the `locale` given, or else of the host's vue-i18n locale
 * (its global `$i18n`, read without importing vue-i18n), or else English.
 */
export function useWords(locale: MaybeRefOrGetter<string | null | undefined>): ComputedRef<Words> {
  const i18n = getCurrentInstance()?.appContext.config.globalProperties.$i18n as { locale?: unknown } | undefined
  return computed(() => {
    const given = toValue(locale)
    const host = typeof i18n?.locale === 'string' ? i18n.locale : null
    return wordsFor(given ?? host)
  })
}
