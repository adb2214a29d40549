-- A few lines of protobuf, to write a device's Up by hand: a varint, a
-- field of a varint, a field of bytes, a field of text. The cases that
-- file Ups include it (\i :abs_srcdir/helpers/protobuf.sql, after
-- \getenv abs_srcdir PG_ABS_SRCDIR, which pg_regress sets).
CREATE FUNCTION pg_temp.varint(n bigint) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE out bytea := '\x';
BEGIN
    LOOP
        IF n < 128 THEN RETURN out || set_byte('\x00', 0, n::int); END IF;
        out := out || set_byte('\x00', 0, (n % 128)::int + 128);
        n := n / 128;
    END LOOP;
END $$;
CREATE FUNCTION pg_temp.number(field int, n bigint) RETURNS bytea LANGUAGE sql AS $$
    SELECT pg_temp.varint(field * 8) || pg_temp.varint(n) $$;
CREATE FUNCTION pg_temp.bytes(field int, b bytea) RETURNS bytea LANGUAGE sql AS $$
    SELECT pg_temp.varint(field * 8 + 2) || pg_temp.varint(length(b)) || b $$;
CREATE FUNCTION pg_temp.text(field int, t text) RETURNS bytea LANGUAGE sql AS $$
    SELECT pg_temp.bytes(field, convert_to(t, 'UTF8')) $$;
