"""The layout of a label-count matrix shared by the numpy and torch entropy scorers: entries by class, grouped by
value, and a client's row."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

#: Scores (entropies in bits, cosine distances) this close to the best tie, and ties go to the lowest client index:
#: equal scores computed in different orders break the same way in every implementation.
ENTROPY_TIE_TOL = 1e-10
_TINY = 1e-300  # log2 argument floor: x * log2(max(x, tiny)) is exactly 0 at x = 0


def _class_columns(counts, subset=None):
    """Non-zero entries in class-major order, clients ascending within a class: (col_ptr, rows, vals).

    With ``subset`` (sorted client indices) only those clients' entries, still with their own indices.
    """
    if subset is not None:
        part = sp.csr_array(counts)[subset] if sp.issparse(counts) else counts[subset]
        col_ptr, rows, vals = _class_columns(part)
        index = subset.astype(np.int32) if counts.shape[0] < 2**31 - 1 else subset
        return col_ptr, index[rows], vals
    if sp.issparse(counts):
        csc = sp.csr_array(counts, dtype=float).tocsc()  # new arrays: sum_duplicates/eliminate_zeros are safe
        csc.sum_duplicates()
        csc.eliminate_zeros()
        return csc.indptr.astype(np.int64), csc.indices, csc.data
    num_clients, num_classes = counts.shape
    by_class = np.ascontiguousarray(counts.T).ravel()
    nonzero = by_class != 0
    flat = np.flatnonzero(nonzero)
    col_nnz = np.count_nonzero(nonzero.reshape(num_classes, num_clients), axis=1)
    col_ptr = np.concatenate(([0], np.cumsum(col_nnz)))
    rows = flat - np.repeat(np.arange(num_classes, dtype=np.int64) * num_clients, col_nnz)
    return col_ptr, rows, np.take(by_class, flat)


def _group_by_value(col_ptr, rows, vals, integer: bool):
    """Sort each class's entries by value (stably: clients stay ascending within a value).

    Returns ``rows``, ``slot_ptr`` (entries of slot j: ``slot_ptr[j]:slot_ptr[j+1]``), ``slot_vals`` (the
    value of each slot) and ``class_slots`` (slots of class c: ``class_slots[c]:class_slots[c+1]``).
    """
    order = np.empty(rows.size, dtype=np.int64 if rows.size >= 2**31 - 1 else np.int32)
    for c in range(col_ptr.size - 1):
        p0, p1 = col_ptr[c], col_ptr[c + 1]
        v = vals[p0:p1]
        if integer and v.size and v.max() < 1 << 16:
            v = v.astype(np.uint16)  # numpy sorts 16-bit integers stably with a radix sort
        order[p0:p1] = p0 + np.argsort(v, kind="stable")
    rows, vals = rows[order], vals[order]
    starts = np.ones(rows.size, dtype=bool)
    starts[1:] = vals[1:] != vals[:-1]
    starts[col_ptr[:-1][col_ptr[:-1] < rows.size]] = True  # a new class starts a new slot
    starts = np.flatnonzero(starts)
    slot_ptr = np.append(starts, rows.size)
    class_slots = np.searchsorted(starts, col_ptr, side="left")
    return rows, slot_ptr, vals[starts], class_slots


def _row_reader(counts):
    """``m -> (classes, values)`` of client m's non-zero counts."""
    if sp.issparse(counts):
        csr = sp.csr_array(counts, dtype=float)
        csr.sum_duplicates()
        indptr, indices, data = csr.indptr, csr.indices, csr.data

        def row(m):
            cls, x = indices[indptr[m] : indptr[m + 1]], data[indptr[m] : indptr[m + 1]]
            keep = x != 0
            return cls[keep].astype(np.intp), x[keep]

        return row

    def row(m):
        cls = np.flatnonzero(counts[m])
        return cls, counts[m][cls].astype(float)

    return row
