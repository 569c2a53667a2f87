-- Outbox messages of one type leave once grants acknowledged them, by redemption id.
CREATE OR REPLACE FUNCTION ack_outbox(ids uuid[], message_type text) RETURNS void
LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
    DELETE FROM coupons.outbox o WHERE o.redemption_id = ANY(ids) AND o.type = message_type;
END $$;
