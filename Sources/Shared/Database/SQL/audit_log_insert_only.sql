-- The audit log is a record: every role but the table's owner loses UPDATE, DELETE and TRUNCATE
-- on it (`AuditTable.insertOnly`), so the services' runtime roles may only add to it.
DO $$
DECLARE holder text;
BEGIN
    FOR holder IN
        SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END
        FROM pg_class c, aclexplode(c.relacl) a
        WHERE c.oid = 'audit_log'::regclass AND a.grantee <> c.relowner AND a.privilege_type IN ('UPDATE', 'DELETE', 'TRUNCATE')
    LOOP
        EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON audit_log FROM %s', holder);
    END LOOP;
END $$;
