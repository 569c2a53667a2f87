-- The same reservation spread over 1,000 coupons.
\set c random(1, 1000)
BEGIN;
UPDATE pgb.coupons SET used = used + 1 WHERE id = :c AND used < cap;
INSERT INTO pgb.redemptions (coupon, account) VALUES (:c, gen_random_uuid());
INSERT INTO pgb.outbox (redemption, payload) VALUES (currval('pgb.redemptions_id_seq'), '{"type":"grants.grant"}');
END;
