-- One service's database roles (deploy/database-roles runs this once per service, with the psql
-- variables `service`, `owner_password` and `runtime_password`):
--   redeem_<service>_owner  owns schema <service> and everything in it; `<service> migrate` runs as it
--   redeem_<service>        the service at run time: reads and writes the schema's tables and calls
--                           its functions; no DDL, and nothing of any other schema
-- Run as a role that may create roles and schemas (a superuser, or a managed database's admin with
-- CREATEROLE). Safe to run again: it creates what is missing, sets the passwords, and hands a
-- schema made before the roles existed (one role for everything) to its owner.
\set owner redeem_ :service _owner
\set runtime redeem_ :service

SELECT format('CREATE ROLE %I', :'owner') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'owner') \gexec
SELECT format('CREATE ROLE %I', :'runtime') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'runtime') \gexec
ALTER ROLE :"owner" WITH LOGIN PASSWORD :'owner_password';
ALTER ROLE :"runtime" WITH LOGIN PASSWORD :'runtime_password';
-- A non-superuser admin acts for the owner below (schema, default privileges) as its member.
SELECT format('GRANT %I TO CURRENT_USER', :'owner') WHERE NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) \gexec

SELECT format('CREATE SCHEMA %I AUTHORIZATION %I', :'service', :'owner')
    WHERE NOT EXISTS (SELECT FROM pg_namespace WHERE nspname = :'service') \gexec
ALTER SCHEMA :"service" OWNER TO :"owner";
-- What a one-role install made passes to the owner, so its migrations can alter it and its
-- functions be replaced: tables, views, free-standing sequences (indexes and a column's sequence
-- follow their table) and functions.
SELECT format('ALTER TABLE %I.%I OWNER TO %I', n.nspname, c.relname, :'owner')
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = :'service' AND pg_get_userbyid(c.relowner) <> :'owner'
      AND (c.relkind IN ('r', 'p', 'v', 'm', 'f')
           OR (c.relkind = 'S' AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('a', 'i')))) \gexec
SELECT format('ALTER FUNCTION %s OWNER TO %I', p.oid::regprocedure, :'owner')
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = :'service' AND pg_get_userbyid(p.proowner) <> :'owner' \gexec

-- The runtime role: data, not definitions. What exists now, and what the owner's later
-- migrations create (default privileges).
REVOKE ALL ON SCHEMA :"service" FROM PUBLIC;
GRANT USAGE ON SCHEMA :"service" TO :"runtime";
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA :"service" TO :"runtime";
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA :"service" TO :"runtime";
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA :"service" TO :"runtime";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA :"service" GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO :"runtime";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA :"service" GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO :"runtime";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA :"service" GRANT EXECUTE ON FUNCTIONS TO :"runtime";
-- The audit log is a record: the runtime role adds to it, never changes or erases it. Its
-- migration revokes the rest when it makes the table; the grant above gave it back on a re-run.
SELECT format('REVOKE UPDATE, DELETE, TRUNCATE ON %I.audit_log FROM %I', :'service', :'runtime')
    WHERE to_regclass(format('%I.audit_log', :'service')) IS NOT NULL \gexec
