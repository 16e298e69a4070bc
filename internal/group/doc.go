// Package group owns the failure signature that puts every DLQ entry in a
// failure group: the source system, the topic, the class and the error
// with its variable parts (numbers, ids, hex, UUIDs, timestamps, quoted
// values) masked, plus the top frames of a stack when the message carries
// one. It is pure and cheap (one pass over the message, no regexps): the
// store computes it on every entry write to keep the group index. It must
// never read the store, the clock or the network.
package group
