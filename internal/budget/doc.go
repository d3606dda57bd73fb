// Package budget bounds bytes held between two goroutines: one acquires
// before handing data on, the other releases once it is done with it.
//
// Input: Acquire/TryAcquire of a size before data is handed on, Release of
// the same size once it is consumed. Output: whether (and when) there is
// room. Invariant: the bytes held never exceed the limit, except that a
// single item larger than the limit passes alone when nothing else is held.
package budget
