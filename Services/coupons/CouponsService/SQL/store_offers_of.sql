-- A coupon's store offers, by its key: what validate and redeem on iOS read of a coupon with
-- offers, one index probe whatever the statistics say.
CREATE OR REPLACE FUNCTION store_offers_of(coupon uuid) RETURNS SETOF coupons.store_offers
LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$
BEGIN
    RETURN QUERY SELECT o.* FROM coupons.store_offers o WHERE o.coupon_id = coupon;
END $$;
