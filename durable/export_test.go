package durable

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// OutcomeRecords returns how many outcome records s holds, or an error if
// its two buckets of them disagree.
func OutcomeRecords(s *Store) (int, error) {
	var records, listed int
	err := s.view(context.Background(), func(tx *bolt.Tx) error {
		records, listed = tx.Bucket(bucketOutcome).Stats().KeyN, tx.Bucket(bucketOrder).Stats().KeyN
		return nil
	})
	if err == nil && records != listed {
		err = fmt.Errorf("%d outcome records, %d listed", records, listed)
	}
	return records, err
}
