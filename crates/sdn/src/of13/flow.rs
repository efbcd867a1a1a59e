//! FLOW_MOD with its instructions and actions.

use super::buf::{Put, Reader};
use super::oxm::{Match, Oxm};
use super::CodecError;

/// Flow-mod commands.
pub mod command {
    /// New flow.
    pub const ADD: u8 = 0;
    /// Modify matching flows.
    pub const MODIFY: u8 = 1;
    /// Modify the flow with this exact match and priority.
    pub const MODIFY_STRICT: u8 = 2;
    /// Delete matching flows.
    pub const DELETE: u8 = 3;
    /// Delete the flow with this exact match and priority.
    pub const DELETE_STRICT: u8 = 4;
}

/// An action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// OFPAT_OUTPUT.
    Output {
        /// Port.
        port: u32,
        /// Bytes to the controller.
        max_len: u16,
    },
    /// OFPAT_SET_FIELD.
    SetField(Oxm),
    /// Any other action, as type and body (after type and length).
    Other {
        /// Action type.
        typ: u16,
        /// Body without the 4-byte header.
        body: Vec<u8>,
    },
}

impl Action {
    fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        match self {
            Action::Output { port, max_len } => {
                out.put_u16(0);
                out.put_u16(16);
                out.put_u32(*port);
                out.put_u16(*max_len);
                out.pad(6);
            }
            Action::SetField(oxm) => {
                out.put_u16(25);
                out.put_u16(0);
                oxm.encode_one(out);
                out.pad_to_8(start);
                let len = (out.len() - start) as u16;
                out.set_u16(start + 2, len);
            }
            Action::Other { typ, body } => {
                out.put_u16(*typ);
                out.put_u16((4 + body.len()) as u16);
                out.extend_from_slice(body);
            }
        }
    }

    fn decode(r: &mut Reader) -> Result<Action, CodecError> {
        let typ = r.u16()?;
        let len = r.u16()? as usize;
        if len < 8 || len % 8 != 0 {
            return Err(CodecError::BadLength("action length not a multiple of 8"));
        }
        let body = r.bytes(len - 4)?;
        let mut br = Reader::new(body, "action");
        Ok(match typ {
            0 => Action::Output {
                port: br.u32()?,
                max_len: br.u16()?,
            },
            25 => Action::SetField(Oxm::decode_one(&mut br)?),
            _ => Action::Other {
                typ,
                body: body.to_vec(),
            },
        })
    }

    /// Encode a list.
    pub fn encode_list(actions: &[Action], out: &mut Vec<u8>) {
        for a in actions {
            a.encode(out);
        }
    }

    /// Decode a list filling `data`.
    pub fn decode_list(data: &[u8]) -> Result<Vec<Action>, CodecError> {
        let mut r = Reader::new(data, "action list");
        let mut v = Vec::new();
        while r.remaining() > 0 {
            v.push(Action::decode(&mut r)?);
        }
        Ok(v)
    }
}

/// An instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instruction {
    /// OFPIT_GOTO_TABLE.
    GotoTable(u8),
    /// OFPIT_WRITE_METADATA.
    WriteMetadata {
        /// Value.
        metadata: u64,
        /// Which bits.
        mask: u64,
    },
    /// OFPIT_WRITE_ACTIONS.
    WriteActions(Vec<Action>),
    /// OFPIT_APPLY_ACTIONS.
    ApplyActions(Vec<Action>),
    /// OFPIT_CLEAR_ACTIONS.
    ClearActions,
    /// Any other instruction, as type and body.
    Other {
        /// Type.
        typ: u16,
        /// Body without the 4-byte header.
        body: Vec<u8>,
    },
}

impl Instruction {
    fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        match self {
            Instruction::GotoTable(t) => {
                out.put_u16(1);
                out.put_u16(8);
                out.put_u8(*t);
                out.pad(3);
            }
            Instruction::WriteMetadata { metadata, mask } => {
                out.put_u16(2);
                out.put_u16(24);
                out.pad(4);
                out.put_u64(*metadata);
                out.put_u64(*mask);
            }
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => {
                let typ = if matches!(self, Instruction::WriteActions(_)) {
                    3
                } else {
                    4
                };
                out.put_u16(typ);
                out.put_u16(0);
                out.pad(4);
                Action::encode_list(a, out);
                let len = (out.len() - start) as u16;
                out.set_u16(start + 2, len);
            }
            Instruction::ClearActions => {
                out.put_u16(5);
                out.put_u16(8);
                out.pad(4);
            }
            Instruction::Other { typ, body } => {
                out.put_u16(*typ);
                out.put_u16((4 + body.len()) as u16);
                out.extend_from_slice(body);
            }
        }
    }

    fn decode(r: &mut Reader) -> Result<Instruction, CodecError> {
        let typ = r.u16()?;
        let len = r.u16()? as usize;
        if len < 8 {
            return Err(CodecError::BadLength("instruction shorter than 8"));
        }
        let body = r.bytes(len - 4)?;
        let mut br = Reader::new(body, "instruction");
        Ok(match typ {
            1 => Instruction::GotoTable(br.u8()?),
            2 => {
                br.skip(4)?;
                Instruction::WriteMetadata {
                    metadata: br.u64()?,
                    mask: br.u64()?,
                }
            }
            3 => Instruction::WriteActions(Action::decode_list(&body[4..])?),
            4 => Instruction::ApplyActions(Action::decode_list(&body[4..])?),
            5 => Instruction::ClearActions,
            _ => Instruction::Other {
                typ,
                body: body.to_vec(),
            },
        })
    }

    /// Encode a list.
    pub fn encode_list(list: &[Instruction], out: &mut Vec<u8>) {
        for i in list {
            i.encode(out);
        }
    }

    /// Decode a list filling `data`.
    pub fn decode_list(data: &[u8]) -> Result<Vec<Instruction>, CodecError> {
        let mut r = Reader::new(data, "instruction list");
        let mut v = Vec::new();
        while r.remaining() > 0 {
            v.push(Instruction::decode(&mut r)?);
        }
        Ok(v)
    }
}

/// OFPT_FLOW_MOD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowMod {
    /// Cookie.
    pub cookie: u64,
    /// Cookie mask (modify/delete).
    pub cookie_mask: u64,
    /// Table.
    pub table_id: u8,
    /// [`command`].
    pub command: u8,
    /// Idle timeout, s.
    pub idle_timeout: u16,
    /// Hard timeout, s.
    pub hard_timeout: u16,
    /// Priority.
    pub priority: u16,
    /// Buffered packet.
    pub buffer_id: u32,
    /// Delete: only flows outputting here.
    pub out_port: u32,
    /// Delete: only flows outputting to this group.
    pub out_group: u32,
    /// Flags.
    pub flags: u16,
    /// Match.
    pub matches: Match,
    /// Instructions.
    pub instructions: Vec<Instruction>,
}

impl FlowMod {
    /// An ADD into `table_id` with `priority`, `matches` and `instructions`.
    pub fn add(
        table_id: u8,
        priority: u16,
        matches: Match,
        instructions: Vec<Instruction>,
    ) -> FlowMod {
        FlowMod {
            cookie: 0,
            cookie_mask: 0,
            table_id,
            command: command::ADD,
            idle_timeout: 0,
            hard_timeout: 0,
            priority,
            buffer_id: super::NO_BUFFER,
            out_port: super::OFPP_ANY,
            out_group: super::OFPG_ANY,
            flags: 0,
            matches,
            instructions,
        }
    }

    /// Encode the body (after the header).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.cookie);
        out.put_u64(self.cookie_mask);
        out.put_u8(self.table_id);
        out.put_u8(self.command);
        out.put_u16(self.idle_timeout);
        out.put_u16(self.hard_timeout);
        out.put_u16(self.priority);
        out.put_u32(self.buffer_id);
        out.put_u32(self.out_port);
        out.put_u32(self.out_group);
        out.put_u16(self.flags);
        out.pad(2);
        self.matches.encode(out);
        Instruction::encode_list(&self.instructions, out);
    }

    /// Decode the body (after the header).
    pub fn decode(body: &[u8]) -> Result<FlowMod, CodecError> {
        let mut r = Reader::new(body, "flow_mod");
        let cookie = r.u64()?;
        let cookie_mask = r.u64()?;
        let table_id = r.u8()?;
        let command = r.u8()?;
        let idle_timeout = r.u16()?;
        let hard_timeout = r.u16()?;
        let priority = r.u16()?;
        let buffer_id = r.u32()?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        let flags = r.u16()?;
        r.skip(2)?;
        let matches = Match::decode(&mut r)?;
        let instructions = Instruction::decode_list(r.rest())?;
        Ok(FlowMod {
            cookie,
            cookie_mask,
            table_id,
            command,
            idle_timeout,
            hard_timeout,
            priority,
            buffer_id,
            out_port,
            out_group,
            flags,
            matches,
            instructions,
        })
    }
}
