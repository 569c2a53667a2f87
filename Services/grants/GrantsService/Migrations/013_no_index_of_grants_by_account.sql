-- A grant's updates change its status and next attempt, so none is a HOT update and each
-- writes every index of the table again: this one cost three index entries per completion
-- (about 400 bytes of WAL) for a holder move, which is rare and finds its rows through
-- grants_holder (app_user_id first) just as well.
DROP INDEX grants_account;
