-- The triggers of the engine's trigger functions (those of the schema
-- sync), on any table, by table and name; a clone on a partition of a
-- partitioned table is its parent's, and left out. No parameters.
-- Answers, one row a trigger: the table's oid, the trigger's name, its
-- function (schema.name), tgtype, tgenabled, tgargs (each argument followed
-- by a zero byte), the number of arguments, whether it is plain (no WHEN,
-- no column list, no transition tables, not a constraint trigger), and its
-- definition as pg_get_triggerdef prints it.
SELECT t.tgrelid, t.tgname::text,
       n.nspname::text || '.' || p.proname::text, t.tgtype, t.tgenabled::text,
       t.tgargs, t.tgnargs::int,
       t.tgqual IS NULL AND t.tgattr::text = '' AND t.tgoldtable IS NULL
         AND t.tgnewtable IS NULL AND t.tgconstraint = 0,
       pg_get_triggerdef(t.oid)
  FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
  JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'sync' AND p.prorettype = 'trigger'::regtype
   AND t.tgparentid = 0 AND NOT t.tgisinternal
 ORDER BY t.tgrelid, t.tgname
