package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/agentowl/agentowl/internal/secret"
	"github.com/agentowl/agentowl/internal/server"
)

// `agentowl secrets`: the secret key's rotation, run directly against the
// database like `admin bootstrap`, with running replicas or without
// (docs/operating.md, "The secret key"; server.RotateSecretKey).

// defaultResealBatch is how many values one transaction re-seals.
const defaultResealBatch = 100

func (c *cli) secretsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "secrets", Short: "The secret key that seals stored secrets: rotation, directly against the database"}
	var db offlineDatabase
	var newKeyFile, oldKeyFile string
	var batch, batches int
	rotate := &cobra.Command{
		Use:   "rotate-key",
		Short: "Re-seal every stored secret with a new key, then report when the old key can be removed",
		Long: `Re-seals every stored secret with the new key, in batches of one transaction each, and
reports when no value sealed by the old key remains: the old key can then be removed.

The new key is --new-key-file (the base64 of 32 bytes), or else AGENTOWL_SECRET_KEY when
AGENTOWL_SECRET_KEY_PREVIOUS holds the old one (the settings a replica in mid-rotation runs
with). The old key is --old-key-file, or else whichever other key is given:
AGENTOWL_SECRET_KEY_PREVIOUS or DATA-DIR/secret-key.previous, AGENTOWL_SECRET_KEY or
DATA-DIR/secret-key.

Safe while replicas run, once every replica runs with the new key as AGENTOWL_SECRET_KEY and
the old one as AGENTOWL_SECRET_KEY_PREVIOUS; interrupted, run it again: it continues.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, d, err := db.where()
			if err != nil {
				return err
			}
			newKey, others, err := rotationKeys(dir, newKeyFile, oldKeyFile)
			if err != nil {
				return err
			}
			st, box, err := server.OpenStoreRotating(cmd.Context(), dir, d, newKey, others, 0)
			if err != nil {
				return err
			}
			defer st.Close()
			return c.rotate(cmd.Context(), box, server.Rotation{Batch: batch, Batches: batches},
				func(ctx context.Context) (server.KeyStatus, error) { return server.SecretKeyStatus(ctx, st) },
				func(ctx context.Context, r server.Rotation) (int, bool, error) {
					return server.RotateSecretKey(ctx, st, r)
				})
		},
	}
	db.flags(rotate)
	rotate.Flags().StringVar(&newKeyFile, "new-key-file", "", "file holding the new key, base64 of 32 bytes (openssl rand -base64 32)")
	rotate.Flags().StringVar(&oldKeyFile, "old-key-file", "", "file holding the old key (default: AGENTOWL_SECRET_KEY_PREVIOUS or DATA-DIR/secret-key.previous, AGENTOWL_SECRET_KEY or DATA-DIR/secret-key)")
	rotate.Flags().IntVar(&batch, "batch", defaultResealBatch, "values re-sealed per transaction")
	rotate.Flags().IntVar(&batches, "batches", 0, "stop after this many batches (0: run to the end); run again to continue")

	status := &cobra.Command{
		Use:   "key-status",
		Short: "Show the secret key's check values and how many stored secrets the current key has not sealed yet",
		RunE: func(cmd *cobra.Command, args []string) error {
			// Counting sealed values opens none: no key.
			st, err := db.open(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer st.Close()
			s, err := server.SecretKeyStatus(cmd.Context(), st)
			if err != nil {
				return err
			}
			return c.emit(statusJSON(s), func(w io.Writer) { printKeyStatus(w, s) })
		},
	}
	db.flags(status)
	cmd.AddCommand(rotate, status)
	return cmd
}

// rotationKeys returns the new key and the others given (the old key), as
// rotate-key's help describes.
func rotationKeys(dataDir, newKeyFile, oldKeyFile string) (newKey []byte, others [][]byte, err error) {
	if oldKeyFile != "" {
		if newKeyFile == "" {
			return nil, nil, errors.New("--old-key-file needs --new-key-file")
		}
		if newKey, err = readKey(newKeyFile); err != nil {
			return nil, nil, err
		}
		old, err := readKey(oldKeyFile)
		return newKey, [][]byte{old}, err
	}
	current, err := keySetting("AGENTOWL_SECRET_KEY", filepath.Join(dataDir, "secret-key"))
	if err != nil {
		return nil, nil, err
	}
	previous, err := keySetting("AGENTOWL_SECRET_KEY_PREVIOUS", filepath.Join(dataDir, "secret-key.previous"))
	if err != nil {
		return nil, nil, err
	}
	if newKeyFile == "" {
		if current == nil || previous == nil {
			return nil, nil, errors.New("no new key: give --new-key-file FILE, or the new key as AGENTOWL_SECRET_KEY " +
				"and the old one as AGENTOWL_SECRET_KEY_PREVIOUS")
		}
		return current, [][]byte{previous}, nil
	}
	if newKey, err = readKey(newKeyFile); err != nil {
		return nil, nil, err
	}
	for _, k := range [][]byte{previous, current} {
		if k != nil && !bytes.Equal(k, newKey) {
			others = append(others, k)
		}
	}
	return newKey, others, nil
}

// keySetting is the key in the variable env, else in the file at path;
// nil when neither is set.
func keySetting(env, path string) ([]byte, error) {
	if v := os.Getenv(env); v != "" {
		key, err := parseKey(v)
		if err != nil {
			return nil, fmt.Errorf("%s %w", env, err)
		}
		return key, nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return readKey(path)
}

func readKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := parseKey(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s %w", path, err)
	}
	return key, nil
}

// rotate runs the rotation of a store opened with box (run, reading its
// status with status) and prints its progress and outcome.
func (c *cli) rotate(ctx context.Context, box *secret.Box, r server.Rotation,
	status func(context.Context) (server.KeyStatus, error), run func(context.Context, server.Rotation) (int, bool, error)) error {
	if r.Batch <= 0 {
		return fmt.Errorf("--batch %d: must be at least 1", r.Batch)
	}
	before, err := status(ctx)
	if err != nil {
		return err
	}
	if !c.json {
		fmt.Fprintf(c.stdout, "Re-sealing with key %s: %d of %d stored secrets to re-seal.\n",
			hex.EncodeToString(box.KeyCheck()[:secret.KeyIDSize]), before.Remaining, before.Sealed)
		r.Progress = func(batch, total int) { fmt.Fprintf(c.stdout, "Re-sealed %d (%d in all).\n", batch, total) }
	}
	resealed, done, err := run(ctx, r)
	if err != nil {
		return err
	}
	after, err := status(ctx)
	if err != nil {
		return err
	}
	out := statusJSON(after)
	out["resealed"], out["old_key_removable"] = resealed, done
	return c.emit(out, func(w io.Writer) {
		if done {
			fmt.Fprintf(w, "Every stored secret (%d) is sealed by the new key: the old key can be removed.\n", after.Sealed)
			fmt.Fprintln(w, "Remove AGENTOWL_SECRET_KEY_PREVIOUS (or DATA-DIR/secret-key.previous) from every replica, keep the new key as "+
				"AGENTOWL_SECRET_KEY (or DATA-DIR/secret-key), and restart them.")
			return
		}
		fmt.Fprintf(w, "Stopped with %d of %d stored secrets still sealed by the old key: run rotate-key again to continue; keep the old key until it reports that it can be removed.\n",
			after.Remaining, after.Sealed)
	})
}

func statusJSON(s server.KeyStatus) map[string]any {
	return map[string]any{"key": s.Key, "previous_key": s.PreviousKey, "retired_key": s.RetiredKey,
		"sealed": s.Sealed, "remaining": s.Remaining, "rotation_under_way": s.RotationUnderWay()}
}

func printKeyStatus(w io.Writer, s server.KeyStatus) {
	if s.Key == "" {
		fmt.Fprintln(w, "No secret key recorded yet: the first start with a key records it.")
		return
	}
	fmt.Fprintf(w, "Key %s seals %d of %d stored secrets.\n", s.Key, s.Sealed-s.Remaining, s.Sealed)
	switch {
	case s.RotationUnderWay():
		fmt.Fprintf(w, "A rotation from key %s is under way: %d secrets to re-seal; keep the old key given as AGENTOWL_SECRET_KEY_PREVIOUS "+
			"and run `agentowl secrets rotate-key`.\n", s.PreviousKey, s.Remaining)
	case s.RetiredKey != "":
		fmt.Fprintf(w, "Key %s was retired by the last rotation: it can be removed.\n", s.RetiredKey)
	}
}
