-- Test mode and live mode are two worlds (SPEC §4.7): a code is unique within its mode, so
-- the same code may exist once in each. Every coupon already has its mode (its creating
-- key's). Messages still in the outbox get their coupon's mode, which grants routes their
-- webhooks by; redemptions take their mode from their coupon and need no column.
ALTER TABLE coupons DROP CONSTRAINT coupons_code_key;
ALTER TABLE coupons ADD CONSTRAINT coupons_code_mode_key UNIQUE (code, mode);
UPDATE outbox o SET payload = jsonb_set(o.payload::jsonb, '{body,mode}', to_jsonb(c.mode))::text
FROM redemptions r JOIN coupons c ON c.id = r.coupon_id
WHERE r.id = o.redemption_id AND jsonb_typeof(o.payload::jsonb -> 'body') = 'object';
