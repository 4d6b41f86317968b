# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converge by verification: the stamps a provisioning role leaves on a node (stamps, node side)
and the decision which roles a node still needs (plan, controller side)."""
