-- The naive reservation on one hot coupon: bump its counter, insert the redemption and the
-- outbox row, commit (synchronous_commit stays on).
BEGIN;
UPDATE pgb.coupons SET used = used + 1 WHERE id = 1 AND used < cap;
INSERT INTO pgb.redemptions (coupon, account) VALUES (1, gen_random_uuid());
INSERT INTO pgb.outbox (redemption, payload) VALUES (currval('pgb.redemptions_id_seq'), '{"type":"grants.grant"}');
END;
